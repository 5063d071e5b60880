"""A run by turn index and by held-out category: where credit goes, what the policy does, what it
solves (`agentgym-rl show RUN --by-turn`, and `summary.md`).

Contract. `turn_rows(run)` gives one `TurnRow` per turn index the rollout servers played: turns
played, the invalid share, the repeated share (the episode's previous action again) and the
shares of the three commonest action kinds, from each
server's last `by_turn` snapshot (counts since that server started; summed over servers), and
the mean advantage of that turn's trained tokens over the learner's steps (`adv_by_turn`; None
where no step trained that turn) and the mean share of that turn's keyed turns in step groups of
two or more (`step_group_share_by_turn`: which turns step credit could judge; None where not
logged). `category_rows(run)` gives, per held-out category of each env,
success at the first and the last evaluated version beside chance and the rule (None where not
measured). `render(run)` prints both as markdown tables ("" when the run has neither).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from agentgym_rl.report.records import RunRecords

TOP_KINDS = 3


@dataclass(frozen=True, slots=True)
class TurnRow:
    turn: str
    turns: int
    invalid_share: float
    repeated_share: float
    kinds: list[tuple[str, float]]
    """The commonest action kinds and their shares of the turns."""
    advantage: float | None
    shared: float | None = None
    """The mean over steps of the share of this turn's keyed turns in step groups of two or
    more (`step_group_share_by_turn`; None where not logged)."""


@dataclass(frozen=True, slots=True)
class CategoryRow:
    env: str
    category: str
    first: tuple[int, float]
    last: tuple[int, float]
    chance: float | None
    rule: float | None


def turn_rows(run: RunRecords) -> list[TurnRow]:
    played: Counter[str] = Counter()
    invalid: Counter[str] = Counter()
    repeated: Counter[str] = Counter()
    kinds: dict[str, Counter[str]] = {}
    for records in run.rollout.values():
        last: dict[str, Any] = next((r["by_turn"] for r in reversed(records) if "by_turn" in r), {})
        for turn, c in last.items():
            played[turn] += int(c.get("turns", 0))
            invalid[turn] += int(c.get("invalid", 0))
            repeated[turn] += int(c.get("repeated", 0))
            kinds.setdefault(turn, Counter()).update(c.get("kinds", {}))
    advantages, shared = (
        _by_turn_means(run, "adv_by_turn"),
        _by_turn_means(run, "step_group_share_by_turn"),
    )
    turns = sorted(set(played) | set(advantages), key=int)
    rows = []
    for t in turns:
        n = played[t]
        top = [(k, c / n) for k, c in kinds.get(t, Counter()).most_common(TOP_KINDS)] if n else []
        shares = (_share(invalid, t, n), _share(repeated, t, n))
        rows.append(TurnRow(t, n, *shares, top, advantages.get(t), shared.get(t)))
    return rows


def _by_turn_means(run: RunRecords, key: str) -> dict[str, float]:
    """The mean over the learner's steps of a by-turn metric, per turn index."""
    values: dict[str, list[float]] = {}
    for step in run.learn:
        for turn, v in (step.get(key) or {}).items():
            values.setdefault(turn, []).append(float(v))
    return {t: sum(v) / len(v) for t, v in values.items()}


def _share(counts: Counter[str], turn: str, n: int) -> float:
    return counts[turn] / n if n else 0.0


def category_rows(run: RunRecords) -> list[CategoryRow]:
    rows = []
    envs: list[str | None] = [*run.eval_envs()] or [None]
    for env in envs:
        for category, curve in run.eval_by_category(env).items():
            chance, rule = run.yardstick(env, category)
            name = env or next(iter(run.yardsticks), "-")
            rows.append(CategoryRow(name, category, curve[0], curve[-1], chance, rule))
    return rows


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def render(run: RunRecords) -> str:
    parts = []
    turns = turn_rows(run)
    if turns:
        lines = [
            "| turn | turns played | invalid | repeated | commonest actions | mean advantage trained "
            "| in shared states |",
            "|---:|---:|---:|---:|---|---:|---:|",
        ]
        for r in turns:
            kinds = ", ".join(f"{k} {share:.0%}" for k, share in r.kinds) or "-"
            adv = "-" if r.advantage is None else f"{r.advantage:+.3f}"
            shared = "-" if r.shared is None else f"{r.shared:.1%}"
            lines.append(
                f"| {r.turn} | {r.turns} | {r.invalid_share:.1%} | {r.repeated_share:.1%} | "
                f"{kinds} | {adv} | {shared} |"
            )
        parts.append("\n".join(lines))
    cats = category_rows(run)
    if cats:
        lines = [
            "| env | held-out category | first | last | chance | rule |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for c in cats:
            lines.append(
                f"| {c.env} | {c.category} | {c.first[1]:.2f} (v{c.first[0]}) | "
                f"{c.last[1]:.2f} (v{c.last[0]}) | {_rate(c.chance)} | {_rate(c.rule)} |"
            )
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + ("\n" if parts else "")
