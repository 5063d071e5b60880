"""Seed bands: runs grouped under labels (one label per schedule, one run per seed), each group
drawn as its mean and the band its seeds span.

Contract: `write_bands(groups, out_dir)` takes `{label: [run_dir, ...]}` and writes
`bands.png` (held-out success against learner step, left, and against wall-clock minutes since
the run's first evaluation, right: per group the mean line over its runs, the min-max band
shaded, each run faint; a collapse marked; chance and the env's rule on the same held-out tasks
as lines, from the first run that measured them) and `bands.md` / `bands.json` (per group: runs, final
held-out success as mean, standard deviation and each run's, the best version's mean, tokens and
turns per episode, generated tokens per run, wall minutes of the whole run and of its RL (first
evaluation to last learner step), the collapse if any). A collapse is the paper's Figure 7
pattern: after its peak, the group's mean falls `COLLAPSE` or more below it. Runs evaluated at
several test-time turn caps (`eval --run RUN --turn-cap ... --out RUN/turn-caps`) also get
`turn_caps.png/.md/.json` (`cap_curves`). A group's point at version v is the mean over the runs that evaluated
v; its wall-clock x is the mean of theirs. `group_runs(specs)` reads `LABEL=GLOB` strings (the
`plot --group` option) into that mapping.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path
from statistics import mean, pstdev
from typing import Any

from matplotlib.figure import Figure

from agentgym_rl.experiments.cap_curves import write_cap_curves
from agentgym_rl.experiments.regimes import RegimeRun
from agentgym_rl.report.plots import yardstick_lines
from agentgym_rl.report.records import RunRecords

COLLAPSE = 0.15
"""Held-out success lost after the peak (mean over seeds) that counts as a collapse."""


@dataclass
class Group:
    """The runs of one label."""

    label: str
    runs: list[RunRecords] = field(default_factory=list)
    curves: list[RegimeRun] = field(default_factory=list)

    def by_version(self) -> list[tuple[int, float, float, float, float]]:
        """(version, mean success, min, max, mean minutes) over the runs that evaluated it."""
        points: dict[int, list[tuple[float, float]]] = {}
        for curve in self.curves:
            for minutes, version, success in curve.curve:
                points.setdefault(version, []).append((success, minutes))
        out = []
        for version, values in sorted(points.items()):
            successes = [s for s, _ in values]
            minutes = mean(m for _, m in values)
            out.append((version, mean(successes), min(successes), max(successes), minutes))
        return out

    def collapse(self) -> dict[str, float] | None:
        """The peak and the lowest point after it, when the fall is a collapse."""
        curve = self.by_version()
        if not curve:
            return None
        peak = max(range(len(curve)), key=lambda i: curve[i][1])
        after = curve[peak + 1 :]
        if not after:
            return None
        low = min(after, key=lambda p: p[1])
        if curve[peak][1] - low[1] < COLLAPSE:
            return None
        return {
            "peak_version": curve[peak][0],
            "peak": curve[peak][1],
            "low_version": low[0],
            "low": low[1],
        }

    def figures(self) -> dict[str, Any]:
        finals = [c.final_success for c in self.curves if c.final_success is not None]
        curve = self.by_version()
        episodes = [r.counter_total("episodes") for r in self.runs]
        tokens = [r.counter_total("generated_tokens") for r in self.runs]
        turns = [r.counter_total("env_steps") for r in self.runs]
        per = [t / e for t, e in zip(tokens, episodes, strict=True) if e]
        turns_per = [t / e for t, e in zip(turns, episodes, strict=True) if e]
        walls = [w for r in self.runs if (w := r.wall_time_s()) is not None]
        return {
            "runs": [r.name for r in self.runs],
            "final_success": finals,
            "final_mean": mean(finals) if finals else None,
            "final_sd": pstdev(finals) if len(finals) > 1 else None,
            "best_mean": max((m for _, m, _, _, _ in curve), default=None),
            "base_mean": curve[0][1] if curve else None,
            "tokens_per_episode": mean(per) if per else None,
            "tokens_total": mean(tokens) if tokens else None,
            "turns_per_episode": mean(turns_per) if turns_per else None,
            "wall_min": mean(walls) / 60 if walls else None,
            "rl_min": mean(c.minutes for c in self.curves) if self.curves else None,
            "collapse": self.collapse(),
        }


def group_runs(specs: Sequence[str]) -> dict[str, list[Path]]:
    """`["ScalingInter=runs/si-*", ...]` -> `{"ScalingInter": [runs/si-0, ...]}` (run folders
    only, sorted); raises `ValueError` naming a spec without `=` or one that matches no run."""
    groups: dict[str, list[Path]] = {}
    for spec in specs:
        label, sep, pattern = spec.partition("=")
        if not sep or not label.strip():
            raise ValueError(f"--group {spec!r}: write LABEL=GLOB, e.g. 'fixed 3=runs/fixed3-*'")
        found = sorted(Path(p) for p in glob(pattern) if (Path(p) / "learn").is_dir())
        if not found:
            raise ValueError(f"--group {spec!r}: {pattern!r} matches no run folder")
        groups.setdefault(label.strip(), []).extend(found)
    return groups


def _draw(groups: list[Group], out: Path) -> Path | None:
    fig = Figure(figsize=(11, 4.2))
    by_step, by_time = fig.subplots(1, 2, sharey=True)
    drawn = 0
    for group in groups:
        points = group.by_version()
        if not points:
            continue
        versions = [p[0] for p in points]
        means, lows, highs = [p[1] for p in points], [p[2] for p in points], [p[3] for p in points]
        minutes = [p[4] for p in points]
        label = f"{group.label} (n={len(group.curves)})"
        [line] = by_step.plot(versions, means, marker=".", label=label)
        colour = line.get_color()
        by_step.fill_between(versions, lows, highs, color=colour, alpha=0.18, linewidth=0)
        by_time.plot(minutes, means, marker=".", color=colour, label=label)
        by_time.fill_between(minutes, lows, highs, color=colour, alpha=0.18, linewidth=0)
        fall = group.collapse()
        if fall is not None:
            by_step.annotate(
                "collapse",
                (fall["low_version"], fall["low"]),
                xytext=(0, -18),
                textcoords="offset points",
                ha="center",
                color=colour,
                arrowprops={"arrowstyle": "->", "color": colour},
            )
        for curve in group.curves:
            xs = [v for _, v, _ in curve.curve]
            by_step.plot(xs, [s for _, _, s in curve.curve], color=colour, alpha=0.3, lw=0.7)
        drawn += 1
    if not drawn:
        return None
    measured = [r for g in groups for r in g.runs if r.yardstick(None) != (None, None)]
    if measured:  # every arm plays the same held-out tasks: one run's yardsticks serve all
        for ax in (by_step, by_time):
            yardstick_lines(ax, measured[0], None, label="" if ax is by_step else None)
    by_step.set(xlabel="learner step", ylabel="held-out success", ylim=(-0.02, 1.02))
    by_time.set(xlabel="wall-clock minutes since the first evaluation")
    for ax in (by_step, by_time):
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("mean over seeds, band: min to max, faint: each run", fontsize="small")
    fig.tight_layout()
    path = out / "bands.png"
    fig.savefig(path, dpi=110)
    return path


def _fmt(value: Any, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _collapse_text(fall: dict[str, float] | None) -> str:
    if fall is None:
        return "none"
    return (
        f"{fall['peak']:.3f} at v{fall['peak_version']:.0f} -> {fall['low']:.3f} at "
        f"v{fall['low_version']:.0f}"
    )


def _markdown(figures: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| group | runs | base | final (mean ± sd) | each run | best | tokens/episode | "
        "tokens per run | turns/episode | wall min | RL min | collapse |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, f in figures.items():
        each = ", ".join(format(s, ".3f") for s in f["final_success"])
        final = f"{_fmt(f['final_mean'], '.3f')} ± {_fmt(f['final_sd'], '.3f')}"
        lines.append(
            f"| {label} | {len(f['runs'])} | {_fmt(f['base_mean'], '.3f')} | {final} | {each} | "
            f"{_fmt(f['best_mean'], '.3f')} | {_fmt(f['tokens_per_episode'], '.0f')} | "
            f"{_fmt(f['tokens_total'], ',.0f')} | {_fmt(f['turns_per_episode'], '.2f')} | "
            f"{_fmt(f['wall_min'], '.1f')} | {_fmt(f['rl_min'], '.1f')} | "
            f"{_collapse_text(f['collapse'])} |"
        )
    return "\n".join(lines) + "\n"


def write_bands(groups: dict[str, list[Path]], out_dir: Path) -> list[Path]:
    """The bands figure and table of `groups` in `out_dir`; the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    loaded = [
        Group(label, [RunRecords.load(d) for d in dirs], [RegimeRun.load(d) for d in dirs])
        for label, dirs in groups.items()
    ]
    written = [p for p in [_draw(loaded, out_dir)] if p is not None]
    figures = {g.label: g.figures() for g in loaded}
    (out_dir / "bands.json").write_text(json.dumps(figures, indent=2) + "\n")
    (out_dir / "bands.md").write_text(_markdown(figures))
    curves = write_cap_curves(groups, out_dir)
    return [*written, out_dir / "bands.md", out_dir / "bands.json", *curves]


__all__ = ["Group", "group_runs", "write_bands"]
