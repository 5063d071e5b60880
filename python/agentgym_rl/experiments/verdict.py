"""A study's decision rule between turn-cap schedules, read from finished runs, fixed before any
run (issue 59, section 4; docs/results/scalinginter).

Contract: runs come as `{arm: {seed: run_dir}}`, the arms' seeds paired. On one held-out category
(the longest rung), `decide(runs, rung, candidate=, short=, long=)` compares the candidate
(ScalingInter) with the fixed short cap by final held-out greedy success and with the fixed long
cap by the area under its success-against-version curve (`area`: the curve's mean height,
trapezoids over the versions evaluated), each by the seed-paired difference's mean and standard
error (`paired`). The candidate wins when both differences exceed two standard errors; the
finding is reversed when either arm beats it by that margin on its measure; otherwise it is not
reproduced. `diagnostics(run_dir)` reads what each run did while training: the share of
episodes that ended on the turn cap, the share of turns that repeated the turn before's action,
the policy's entropy and its KL to the reference (means over the learner's steps). `sampled`
reads a final policy's sampled success per category (an `eval --out` folder's `eval.json`).
`verdict_markdown` writes the verdict with its figures.

Methods against a baseline (issue 76, section 3): `compare(runs, cells, decisive, better=,
than=)` pairs two arms' final held-out greedy success per cell (a category, or `all`: the mean
over categories, the splits' categories being of equal size) over seeds; `better` "helps" when it
beats `than` on a decisive cell and loses on no cell, "hurts" when it loses on any cell, and is
"not told apart" otherwise. `comparison_markdown` writes it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from statistics import mean, stdev
from typing import Any

from agentgym_rl.report.records import RunRecords, number

MARGIN_SE = 2.0
"""A difference counts when it exceeds this many standard errors of the seed-paired difference."""

Curve = list[tuple[int, float]]


def rung_curve(run_dir: Path, rung: str) -> Curve:
    """(version, held-out greedy success on `rung`) per evaluation, in version order."""
    curves = RunRecords.load(run_dir).eval_by_category(None)
    return list(curves.get(rung, []))


def area(curve: Curve) -> float:
    """The curve's mean height over the versions it spans (trapezoids); one point: its value."""
    if not curve:
        raise ValueError("an empty curve has no area")
    if len(curve) == 1:
        return curve[0][1]
    total = sum((v1 - v0) * (s0 + s1) / 2 for (v0, s0), (v1, s1) in pairwise(curve))
    return total / (curve[-1][0] - curve[0][0])


@dataclass(frozen=True)
class Paired:
    """Mean and standard error of `a - b` over the seeds both have."""

    mean: float
    se: float
    seeds: int

    @property
    def beats(self) -> bool:
        return self.seeds >= 2 and self.mean > MARGIN_SE * self.se

    @property
    def loses(self) -> bool:
        return self.seeds >= 2 and -self.mean > MARGIN_SE * self.se


def paired(a: dict[int, float], b: dict[int, float]) -> Paired:
    seeds = sorted(set(a) & set(b))
    diffs = [a[s] - b[s] for s in seeds]
    if not diffs:
        return Paired(math.nan, math.nan, 0)
    se = stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.nan
    return Paired(mean(diffs), se, len(diffs))


@dataclass(frozen=True)
class Verdict:
    rung: str
    candidate: str
    short: str
    long: str
    final: dict[str, dict[int, float]]
    """Per arm and seed: the last evaluation's greedy success on the rung."""
    areas: dict[str, dict[int, float]]
    """Per arm and seed: the area under its success-against-version curve on the rung."""
    final_vs_short: Paired
    area_vs_long: Paired
    outcome: str
    """"wins", "reversed" or "not reproduced"."""


def decide(
    runs: dict[str, dict[int, Path]], rung: str, *, candidate: str, short: str, long: str
) -> Verdict:
    curves = {
        arm: {seed: c for seed, d in seeds.items() if (c := rung_curve(d, rung))}
        for arm, seeds in runs.items()
    }
    final = {arm: {s: c[-1][1] for s, c in by.items()} for arm, by in curves.items()}
    areas = {arm: {s: area(c) for s, c in by.items()} for arm, by in curves.items()}
    vs_short = paired(final.get(candidate, {}), final.get(short, {}))
    vs_long = paired(areas.get(candidate, {}), areas.get(long, {}))
    if vs_short.beats and vs_long.beats:
        outcome = "wins"
    elif vs_short.loses or vs_long.loses:
        outcome = "reversed"
    else:
        outcome = "not reproduced"
    return Verdict(rung, candidate, short, long, final, areas, vs_short, vs_long, outcome)


def diagnostics(run_dir: Path) -> dict[str, float | None]:
    """What one run did in training (see the module docstring); None where not recorded."""
    run = RunRecords.load(run_dir)
    statuses: dict[str, float] = {}
    turns, repeated = 0.0, None
    for records in run.rollout.values():
        last = records[-1] if records else {}
        for status, n in (last.get("statuses") or {}).items():
            statuses[status] = statuses.get(status, 0.0) + float(n)
        for counts in (last.get("by_turn") or {}).values():
            turns += float(counts.get("turns", 0))
            if "repeated" in counts:  # older records did not count them
                repeated = (repeated or 0.0) + float(counts["repeated"])
    episodes = sum(statuses.values())

    def learn_mean(key: str) -> float | None:
        values = [v for r in run.learn if (v := number(r, key)) is not None]
        return mean(values) if values else None

    return {
        "capped": statuses.get("turn_cap", 0.0) / episodes if episodes else None,
        "repeated": repeated / turns if turns and repeated is not None else None,
        "entropy": learn_mean("entropy"),
        "kl_ref": learn_mean("kl_ref"),
    }


def sampled(eval_dir: Path) -> dict[str, float]:
    """Per category: the sampled success an `eval --out eval_dir` measured (its `avg`)."""
    path = eval_dir / "eval.json"
    if not path.is_file():
        return {}
    rows = json.loads(path.read_text()).get("rows", [])
    return {str(r["category"]): float(r["avg"]) for r in rows if "category" in r}


def _pm(p: Paired) -> str:
    return f"{p.mean:+.3f} (SE {p.se:.3f}, {p.seeds} seeds)"


def verdict_markdown(v: Verdict, labels: dict[str, str]) -> str:
    def row(arm: str) -> str:
        f, a = v.final.get(arm, {}), v.areas.get(arm, {})
        each = " / ".join(f"{f[s]:.3f}" for s in sorted(f)) or "-"
        mf = f"{mean(f.values()):.3f}" if f else "-"
        ma = f"{mean(a.values()):.3f}" if a else "-"
        return f"| {labels.get(arm, arm)} | {mf} | {each} | {ma} |"

    lines = [
        f"Decision rung `{v.rung}` (held-out greedy success):",
        "",
        "| arm | final, mean | final, each seed | area under the curve, mean |",
        "|---|---:|---|---:|",
        *(row(arm) for arm in (v.short, v.long, v.candidate)),
        "",
        f"- final, {labels.get(v.candidate, v.candidate)} - {labels.get(v.short, v.short)}: "
        f"{_pm(v.final_vs_short)}",
        f"- area, {labels.get(v.candidate, v.candidate)} - {labels.get(v.long, v.long)}: "
        f"{_pm(v.area_vs_long)}",
        f"- the rule (each difference above {MARGIN_SE:g} standard errors): **{v.outcome}**",
    ]
    return "\n".join(lines) + "\n"


def verdict_json(v: Verdict) -> dict[str, Any]:
    return asdict(v)


def cell_curve(run_dir: Path, cell: str) -> Curve:
    """`rung_curve` of a category, or for `all` the mean over categories at each version
    every category was evaluated at."""
    if cell != "all":
        return rung_curve(run_dir, cell)
    curves = RunRecords.load(run_dir).eval_by_category(None)
    by_version: dict[int, list[float]] = {}
    for curve in curves.values():
        for version, success in curve:
            by_version.setdefault(version, []).append(success)
    return [(v, mean(xs)) for v, xs in sorted(by_version.items()) if len(xs) == len(curves)]


@dataclass(frozen=True)
class Comparison:
    better: str
    than: str
    final: dict[str, dict[str, dict[int, float]]]
    """Per cell, per arm (the two compared), per seed: the last evaluation's greedy success."""
    by_cell: dict[str, Paired]
    decisive: list[str]
    outcome: str
    """"helps", "hurts" or "not told apart"."""


def compare(
    runs: dict[str, dict[int, Path]],
    cells: list[str],
    decisive: list[str],
    *,
    better: str,
    than: str,
) -> Comparison:
    final: dict[str, dict[str, dict[int, float]]] = {}
    for cell in cells:
        final[cell] = {
            arm: {
                seed: c[-1][1]
                for seed, d in runs.get(arm, {}).items()
                if (c := cell_curve(d, cell))
            }
            for arm in (better, than)
        }
    by_cell = {cell: paired(final[cell][better], final[cell][than]) for cell in cells}
    if any(p.loses for p in by_cell.values()):
        outcome = "hurts"
    elif any(by_cell[cell].beats for cell in decisive):
        outcome = "helps"
    else:
        outcome = "not told apart"
    return Comparison(better, than, final, by_cell, list(decisive), outcome)


def comparison_markdown(c: Comparison, labels: dict[str, str]) -> str:
    name = lambda arm: labels.get(arm, arm)  # noqa: E731
    lines = [
        f"{name(c.better)} against {name(c.than)} (held-out greedy success at the last version):",
        "",
        f"| cell | {name(c.than)}, mean | {name(c.better)}, mean | paired difference |",
        "|---|---:|---:|---|",
    ]
    for cell, p in c.by_cell.items():
        a, b = c.final[cell][c.than], c.final[cell][c.better]
        ma = f"{mean(a.values()):.3f}" if a else "-"
        mb = f"{mean(b.values()):.3f}" if b else "-"
        mark = " (decisive)" if cell in c.decisive else ""
        lines.append(f"| {cell}{mark} | {ma} | {mb} | {_pm(p)} |")
    lines += [
        "",
        f"- the rule (a difference counts above {MARGIN_SE:g} standard errors): **{c.outcome}**",
    ]
    return "\n".join(lines) + "\n"
