"""The asynchronous design against the reference's synchronous regime, read from finished runs.

Contract: `RegimeRun.load(run_dir)` reads one `train` run (its mode from `configs/train.yaml`)
into what the comparison needs, on one clock: minutes since the run's first held-out evaluation
started (version 0, when the rollout server starts generating; model creation and engine start
are left out, the same for both; so is the time a resumed run was down, between one `train`
invocation's end and the next's start in `run.jsonl`). Each held-out point sits at the minute
its evaluation started (the version it measures was there then). `compare(runs)` takes the sync
runs' mean final held-out success as the target and reports, per run and per mode: final
success, minutes to reach the target, wall seconds per learner step, the engine's idle share
(time-weighted over the rollout server's metrics snapshots) and the learner's (the share of its
wall time between start and its last step that was not spent in a step or publishing weights),
and the async/sync ratios.
`plot_regimes` draws held-out success against wall-clock minutes for every run on one figure;
`regimes_markdown` writes the table the README quotes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from statistics import mean
from typing import Any

from agentgym_rl.report.records import number, read_jsonl

MODES = ("async", "sync")


@dataclass
class RegimeRun:
    """One finished run on the comparison's clock."""

    name: str
    mode: str
    curve: list[tuple[float, int, float]] = field(default_factory=list)
    """(minutes, version, held-out success) per evaluation."""
    steps: int = 0
    minutes: float = 0.0
    """From the first evaluation's start to the learner's last step."""
    engine_idle: float | None = None
    learner_idle: float | None = None

    @property
    def final_success(self) -> float | None:
        return self.curve[-1][2] if self.curve else None

    @property
    def step_s(self) -> float | None:
        return 60 * self.minutes / self.steps if self.steps else None

    def minutes_to(self, target: float) -> float | None:
        """When a held-out evaluation first reached `target` (None: never)."""
        return next((m for m, _, s in self.curve if s >= target - 1e-9), None)

    @classmethod
    def load(cls, run_dir: Path) -> RegimeRun:
        import yaml  # type: ignore[import-untyped]

        run_dir = Path(run_dir)
        train = yaml.safe_load((run_dir / "configs" / "train.yaml").read_text()) or {}
        run = cls(run_dir.name, str(train.get("mode", "async")))
        evals = read_jsonl(run_dir / "rollout-0" / "eval.jsonl")
        if not evals:
            return run
        live = _live_clock(read_jsonl(run_dir / "run.jsonl"))
        starts = [live(float(e["time"]) - float(e.get("wall_s", 0.0))) for e in evals]
        t0 = starts[0]
        run.curve = [
            ((t - t0) / 60, int(e["version"]), float(e["success"]))
            for t, e in zip(starts, evals, strict=True)
        ]
        learn = read_jsonl(run_dir / "learn" / "metrics.jsonl")
        if learn:
            end = live(float(learn[-1]["time"]))
            run.steps, run.minutes = int(learn[-1]["step"]), (end - t0) / 60
            busy = sum((number(r, "step_s") or 0.0) + (number(r, "sync_s") or 0.0) for r in learn)
            run.learner_idle = max(0.0, 1 - busy / max(end - t0, 1e-9))
            snapshots = [
                {**r, "time": live(t)}
                for r in read_jsonl(run_dir / "rollout-0" / "metrics.jsonl")
                if (t := number(r, "time")) is not None
            ]
            run.engine_idle = _time_weighted(snapshots, "engine_idle_ratio", t0, end)
        return run


def _live_clock(invocations: list[dict[str, Any]]) -> Callable[[float], float]:
    """A clock that stops while the run was down: a time minus the gaps between one
    invocation's end and the next's start that came before it."""
    spans = sorted(
        (s, e)
        for r in invocations
        if (s := number(r, "start")) is not None and (e := number(r, "end")) is not None
    )
    gaps = [(end, start) for (_, end), (start, _) in pairwise(spans) if start > end]

    def live(t: float) -> float:
        return t - sum(min(t, up) - down for down, up in gaps if t > down)

    return live


def _time_weighted(records: list[dict[str, Any]], key: str, t0: float, t1: float) -> float | None:
    """The mean of `key` over [t0, t1], each snapshot weighted by the interval it covers."""
    total = weight = 0.0
    previous = t0
    for r in records:
        t, value = number(r, "time"), number(r, key)
        if t is None or value is None or t <= t0:
            continue
        span = min(t, t1) - previous
        if span > 0:
            total, weight = total + value * span, weight + span
        previous = t
        if t >= t1:
            break
    return total / weight if weight else None


def _figure(value: Any) -> float | None:
    return None if value is None else float(value)


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return mean(known) if known else None


def compare(runs: list[RegimeRun]) -> dict[str, Any]:
    """Per run and per mode figures, the target (sync's mean final success) and the ratios."""
    sync_finals = [r.final_success for r in runs if r.mode == "sync"]
    target = _mean(sync_finals)
    rows = [
        {
            "run": r.name,
            "mode": r.mode,
            "steps": r.steps,
            "final_success": r.final_success,
            "minutes": r.minutes,
            "minutes_to_target": None if target is None else r.minutes_to(target),
            "step_s": r.step_s,
            "engine_idle": r.engine_idle,
            "learner_idle": r.learner_idle,
        }
        for r in runs
    ]
    keys = (
        "final_success",
        "minutes",
        "minutes_to_target",
        "step_s",
        "engine_idle",
        "learner_idle",
    )
    modes: dict[str, dict[str, Any]] = {
        m: {k: _mean([_figure(row[k]) for row in rows if row["mode"] == m]) for k in keys}
        | {
            "runs": sum(row["mode"] == m for row in rows),
            # The mean minutes to target leave out runs that never reached it, which flatters
            # that mode: the count says how many did.
            "reached": sum(
                row["mode"] == m and row["minutes_to_target"] is not None for row in rows
            ),
        }
        for m in MODES
    }
    a, s = modes["async"], modes["sync"]

    def ratio(key: str) -> float | None:
        num, den = a[key], s[key]
        return float(num / den) if num and den else None

    return {
        "target": target,
        "runs": rows,
        "modes": modes,
        "async_over_sync": {k: ratio(k) for k in ("minutes_to_target", "step_s", "minutes")},
    }


def plot_regimes(runs: list[RegimeRun], target: float | None, out: Path) -> Path | None:
    """Held-out success against wall-clock minutes, every run on one figure."""
    drawn = [r for r in runs if r.curve]
    if not drawn:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colors = {"async": "tab:blue", "sync": "tab:orange"}
    styles = ["-", "--", ":", "-."]
    seen: dict[str, int] = {}
    for r in drawn:
        k = seen[r.mode] = seen.get(r.mode, -1) + 1
        xs, _, ys = zip(*r.curve, strict=True)
        ax.plot(xs, ys, styles[k % 4], marker="o", ms=3, color=colors.get(r.mode), label=r.name)
        hit = None if target is None else r.minutes_to(target)
        if hit is not None:
            ax.axvline(hit, color=colors.get(r.mode), alpha=0.25, lw=1)
    if target is not None:
        ax.axhline(target, color="grey", lw=0.8, ls=":", label=f"sync final {target:.3f}")
    ax.set_xlabel("wall-clock minutes since training started")
    ax.set_ylabel("held-out success (greedy)")
    ax.set_title("async vs synchronous regime, same model, data and steps")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def regimes_markdown(figures: dict[str, Any], latency: str) -> str:
    """The comparison as Markdown: one row per run, one per mode, then the ratios."""
    target = figures["target"]
    lines = [
        f"Env step latency: {latency}. Target: the sync runs' mean final held-out success "
        f"({_fmt(target, '.3f')}).",
        "",
        "| run | mode | steps | final success | minutes | minutes to target | s / step "
        "| engine idle | learner idle |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = [
        *figures["runs"],
        *({"run": f"mean {m}", "mode": m, **v} for m, v in figures["modes"].items() if v["runs"]),
    ]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['mode']} | {r.get('steps', '')} | {_fmt(r['final_success'], '.3f')} "
            f"| {_fmt(r['minutes'], '.1f')} | {_fmt(r['minutes_to_target'], '.1f')} "
            f"| {_fmt(r['step_s'], '.1f')} | {_fmt(r['engine_idle'], '.0%')} "
            f"| {_fmt(r['learner_idle'], '.0%')} |"
        )
    ratios = figures["async_over_sync"]
    reached = ", ".join(
        f"{m} {v['reached']} of {v['runs']}" for m, v in figures["modes"].items() if v["runs"]
    )
    lines += [
        "",
        f"Runs that reached the target: {reached}. The mean minutes to target leave out runs "
        "that never reached it (which favours their mode).",
        "",
        "async / sync: minutes to target "
        f"{_fmt(ratios['minutes_to_target'], '.2f')}, seconds per step "
        f"{_fmt(ratios['step_s'], '.2f')}, whole run {_fmt(ratios['minutes'], '.2f')}.",
    ]
    return "\n".join(lines) + "\n"


__all__ = ["RegimeRun", "compare", "plot_regimes", "regimes_markdown"]
