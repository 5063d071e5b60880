"""Avg@n / Pass@n per environment and category, as a markdown table and JSON.

Contract: `summarize(records)` takes episode records, each an `EvalRecord` or a plain tuple
`(env, category, item_id, success, reward[, status])`, and groups them by task
(`env`, `item_id`). For a set of tasks with n_t samples each:

- Avg@n  = mean over tasks of (successes_t / n_t): the expected success rate of one sample;
- Pass@n = fraction of tasks with at least one success among their n_t samples.

`avg_pass` is that math, pure. Rows come per (env, category), then one "all" row per env, then
an overall row when there is more than one env. A task's category is the first one seen for it
(None is shown as "-"). Episodes that ended as env failures (status `env_failure`: the env
server, not the policy, failed) count as unsolved in the table, and the report says how many and
why below it (`failure_lines`), so a broken env never reads as a 0% policy. Nothing here runs
episodes: the rollout server's held-out evaluation and `agentgym-rl eval` both feed records in.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentgym_rl.wire.types import Status

ALL = "all"
NO_CATEGORY = "-"
ENV_FAILURE = Status.ENV_FAILURE.value
NO_REASON = "(no reason recorded)"
SHOWN_REASONS = 3
MARKDOWN_FILE = "eval.md"
JSON_FILE = "eval.json"


@dataclass(frozen=True, slots=True)
class EvalRecord:
    """One evaluated episode."""

    env: str
    category: str | None
    item_id: str
    success: bool
    reward: float
    status: str | None = None
    """How the episode ended (`done`, `turn_cap`, ...), when known."""
    failure: str | None = None
    """Why it ended as an env failure (`create: no server of environment ... is up: ...`)."""
    turns: int | None = None
    runaway_turns: int | None = None
    """Turns that ran to the token cap without a parsable action (the token-level agent)."""
    judged: float | None = None
    """A judge's score of the episode (`eval --judge-model/--judge-url`); None: not judged."""


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table: a set of tasks and their metrics."""

    env: str
    category: str
    tasks: int
    samples: int
    avg: float
    pass_: float
    mean_reward: float


@dataclass
class EvalReport:
    """The table rows plus what produced them (`meta`: model, split, settings...)."""

    n: int
    rows: list[Row]
    records: list[EvalRecord] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    yardsticks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per env, chance and rule by category (`episode/yardsticks.py`), shown beside each row."""
    judge_success_at: float | None = None
    """With judged records: a judged score at or above it is the judge's success."""

    def row(self, env: str, category: str = ALL) -> Row:
        for r in self.rows:
            if (r.env, r.category) == (env, category):
                return r
        raise KeyError(f"no row for env {env!r}, category {category!r}")

    def to_markdown(self) -> str:
        return to_markdown(self)

    def env_failures(self) -> list[tuple[str, int]]:
        """The reasons of the episodes that ended as env failures, with counts, commonest
        first (empty when none did)."""
        return env_failure_reasons(self.records)

    def to_dict(self) -> dict[str, Any]:
        statuses = Counter(r.status for r in self.records if r.status is not None)
        reasons = self.env_failures()
        return {
            "n": self.n,
            "meta": self.meta,
            "rows": [_row_dict(r) for r in self.rows],
            "statuses": dict(sorted(statuses.items())),
            "env_failures": {"episodes": sum(c for _, c in reasons), "reasons": dict(reasons)},
            "yardsticks": self.yardsticks,
            **({"judge": self.judge_agreement()} if self.has_judge() else {}),
            "episodes": [asdict(r) for r in self.records],
        }

    def has_judge(self) -> bool:
        return self.judge_success_at is not None and any(r.judged is not None for r in self.records)

    def judge_agreement(self) -> dict[str, Any]:
        """Per env and overall, the judge beside the env (`judge_agreement`)."""
        at = self.judge_success_at if self.judge_success_at is not None else 0.5
        envs = sorted({r.env for r in self.records})
        out = {env: judge_agreement([r for r in self.records if r.env == env], at) for env in envs}
        return {"success_at": at, **out, ALL: judge_agreement(self.records, at)}

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write `eval.md` and `eval.json` into `out_dir` (created); returns both paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        md, js = out / MARKDOWN_FILE, out / JSON_FILE
        md.write_text(self.to_markdown())
        js.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return md, js


def judge_agreement(records: Sequence[EvalRecord], success_at: float) -> dict[str, Any]:
    """The judged records' scores against the env's verdict: how many were judged, the mean
    score, the share where the judge's success (score >= `success_at`) is the env's, the
    confusion table, and the correlation of score and env reward (None when either is
    constant)."""
    judged = [r for r in records if r.judged is not None]
    both = sum(r.success and r.judged >= success_at for r in judged)  # type: ignore[operator]
    judge_only = sum(not r.success and r.judged >= success_at for r in judged)  # type: ignore[operator]
    env_only = sum(r.success for r in judged) - both
    neither = len(judged) - both - judge_only - env_only
    scores = [float(r.judged) for r in judged]  # type: ignore[arg-type]
    return {
        "episodes": len(judged),
        "mean_score": sum(scores) / len(scores) if scores else None,
        "agreement": (both + neither) / len(judged) if judged else None,
        "confusion": {
            "both": both,
            "judge_only": judge_only,
            "env_only": env_only,
            "neither": neither,
        },
        "correlation": _correlation(scores, [r.reward for r in judged]),
    }


def _correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sx = sum((x - mx) ** 2 for x in xs) ** 0.5
    sy = sum((y - my) ** 2 for y in ys) ** 0.5
    if sx == 0 or sy == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / (sx * sy)


def env_failure_reasons(records: Iterable[EvalRecord]) -> list[tuple[str, int]]:
    """(reason, count) of the env-failure records, commonest first, then alphabetical."""
    counts = Counter(r.failure or NO_REASON for r in records if r.status == ENV_FAILURE)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def failure_lines(
    reasons: Sequence[tuple[str, int]], total: int, *, markdown: bool = False
) -> list[str]:
    """`N of TOTAL episodes failed in the env: REASON` (one reason), or that headline and one
    `- COUNT × REASON` line per reason (the commonest `SHOWN_REASONS`); empty for none."""
    failed = sum(c for _, c in reasons)
    if failed == 0:
        return []
    head = f"{failed} of {total} episodes failed in the env"
    if markdown:
        head = f"**{head}** (status `env_failure`, counted as unsolved above)"
    if len(reasons) == 1:
        return [f"{head}: {reasons[0][0]}"]
    lines = [f"{head}, for {len(reasons)} reasons:"]
    lines += [f"- {count} × {reason}" for reason, count in reasons[:SHOWN_REASONS]]
    if len(reasons) > SHOWN_REASONS:
        rest = sum(c for _, c in reasons[SHOWN_REASONS:])
        lines.append(f"- {rest} × {len(reasons) - SHOWN_REASONS} other reasons (eval.json)")
    return lines


def avg_pass(per_task: Sequence[Sequence[bool]]) -> tuple[float, float]:
    """(Avg@n, Pass@n) of tasks given each task's sample successes; (0, 0) for no tasks."""
    tasks = [t for t in per_task if len(t) > 0]
    if not tasks:
        return 0.0, 0.0
    avg = sum(sum(map(bool, t)) / len(t) for t in tasks) / len(tasks)
    passed = sum(any(t) for t in tasks) / len(tasks)
    return avg, passed


def as_record(r: EvalRecord | Sequence[Any]) -> EvalRecord:
    if isinstance(r, EvalRecord):
        return r
    if not 5 <= len(r) <= 6:
        raise ValueError(
            f"record {r!r}: expected (env, category, item_id, success, reward[, status])"
        )
    env, category, item_id, success, reward, *status = r
    return EvalRecord(str(env), category, str(item_id), bool(success), float(reward), *status)


def summarize(
    records: Iterable[EvalRecord | Sequence[Any]], meta: dict[str, Any] | None = None
) -> EvalReport:
    """The per-env, per-category report of `records` (see the module docstring)."""
    recs = [as_record(r) for r in records]
    successes: dict[tuple[str, str], list[bool]] = defaultdict(list)
    rewards: dict[tuple[str, str], list[float]] = defaultdict(list)
    category: dict[tuple[str, str], str] = {}
    for r in recs:
        key = (r.env, r.item_id)
        successes[key].append(r.success)
        rewards[key].append(r.reward)
        category.setdefault(key, r.category if r.category is not None else NO_CATEGORY)

    def row(env: str, cat: str, keys: list[tuple[str, str]]) -> Row:
        avg, passed = avg_pass([successes[k] for k in keys])
        all_rewards = [x for k in keys for x in rewards[k]]
        return Row(
            env=env,
            category=cat,
            tasks=len(keys),
            samples=len(all_rewards),
            avg=avg,
            pass_=passed,
            mean_reward=sum(all_rewards) / len(all_rewards) if all_rewards else 0.0,
        )

    rows: list[Row] = []
    envs = sorted({env for env, _ in successes})
    for env in envs:
        env_keys = [k for k in successes if k[0] == env]
        for cat in sorted({category[k] for k in env_keys}):
            rows.append(row(env, cat, [k for k in env_keys if category[k] == cat]))
        rows.append(row(env, ALL, env_keys))
    if len(envs) > 1:
        rows.append(row(ALL, ALL, list(successes)))
    n = max((len(s) for s in successes.values()), default=0)
    return EvalReport(n=n, rows=rows, records=recs, meta=dict(meta or {}))


def to_markdown(report: EvalReport) -> str:
    """A markdown table per env: category, tasks, Avg@n, Pass@n, mean reward; with several envs
    each under its name, then the overall line."""
    envs = [env for env in dict.fromkeys(r.env for r in report.rows) if env != ALL]
    lines: list[str] = []
    for env in envs:
        if len(envs) > 1:
            lines += [f"### {env}", ""]
        rows = [r for r in report.rows if r.env == env]
        lines += [*_table(report.n, rows, report.yardsticks.get(env)), ""]
    overall = [r for r in report.rows if r.env == ALL]
    if overall:
        o = overall[0]
        lines.append(
            f"**all envs**: {o.tasks} tasks, Avg@{report.n} {100 * o.avg:.1f}, "
            f"Pass@{report.n} {100 * o.pass_:.1f}, mean reward {o.mean_reward:.3f}"
        )
    failed = failure_lines(report.env_failures(), len(report.records), markdown=True)
    if failed:
        lines += ["", *failed]
    if report.has_judge():
        lines += ["", *judge_lines(report.judge_agreement())]
    return "\n".join(lines).rstrip("\n") + "\n"


def _table(n: int, rows: list[Row], sticks: dict[str, Any] | None = None) -> list[str]:
    """The rows; with the env's yardsticks, its chance and rule (Avg, in %) after Avg@n."""
    chance = (sticks or {}).get("chance") or {}
    rule = (sticks or {}).get("rule") or {}
    extra = " chance | rule |" if sticks else ""
    lines = [
        f"| env | category | tasks | Avg@{n} |{extra} Pass@{n} | mean reward |",
        "|---|---|---:|---:|" + ("---:|---:|" if sticks else "") + "---:|---:|",
    ]
    for r in rows:
        bold = "**" if r.category == ALL else ""
        beside = f" {_pct(chance.get(r.category))} | {_pct(rule.get(r.category))} |"
        lines.append(
            f"| {bold}{r.env}{bold} | {bold}{r.category}{bold} | {r.tasks} | "
            f"{100 * r.avg:.1f} |{beside if sticks else ''} {100 * r.pass_:.1f} | "
            f"{r.mean_reward:.3f} |"
        )
    if sticks:
        rule_name = sticks.get("rule_name") or "none declared"
        lines += [
            "",
            f"chance: the env's random valid action each turn; rule: {rule_name} "
            f"(same tasks, turn cap {sticks.get('turn_cap')})",
        ]
    return lines


def judge_lines(agreement: dict[str, Any]) -> list[str]:
    """The judge beside the env, a markdown table per env and overall."""
    lines = [
        f"**judge** (success at score >= {agreement['success_at']:g}):",
        "",
        "| env | judged | mean score | agreement | both | judge only | env only | neither | "
        "correlation |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for env, a in agreement.items():
        if env == "success_at" or not a["episodes"]:
            continue
        c = a["confusion"]
        corr = "-" if a["correlation"] is None else f"{a['correlation']:.2f}"
        lines.append(
            f"| {env} | {a['episodes']} | {a['mean_score']:.3f} | {100 * a['agreement']:.1f} | "
            f"{c['both']} | {c['judge_only']} | {c['env_only']} | {c['neither']} | {corr} |"
        )
    return lines


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f}"


def _row_dict(r: Row) -> dict[str, Any]:
    d = asdict(r)
    d["pass"] = d.pop("pass_")
    return d
