"""The figure of docs/results/step-credit from its compact record (`records.json`): per rung,
held-out success of each arm (episode-level GRPO, step-level credit, step-wise context k = 4)
against learner step and against minutes of RL, the mean over seeds with the band they span,
chance and the scripted rule as lines.

    python scripts/credit_bands.py [--records docs/results/step-credit/records.json]

Writes `<rung>_bands.png` beside the record. The episode-level runs kept no times (their run
folders were not kept): their minutes are the step-credit arm's at the same version, the same
recipe at the same speed (each about 11 minutes); the figure says so.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import mean
from typing import Any

from matplotlib.figure import Figure

RUNGS: dict[str, dict[str, Any]] = {
    "babyai": {
        "title": "BabyAI distractor cells (cap 5), distractor_test greedy",
        "yardstick": "babyai distractor_test cap 5",
        "rule": "rule",
        "arms": {
            "episode-level": "episode-level",
            "step credit": "babyai distractors, step credit weight 1",
            "context k=4": "babyai distractors, step-wise context k=4",
        },
    },
    "maze": {
        "title": "Maze (cap 16), test greedy",
        "yardstick": "maze test cap 16",
        "rule": "rule (depth-first search)",
        "arms": {
            "episode-level": "maze cap 16, episode-level",
            "step credit": "maze cap 16, step credit",
            "context k=4": "maze cap 16, step-wise context k=4",
        },
    },
}
Curve = list[tuple[int, float, float | None]]


def _curves(record: dict[str, Any], rung: str, prefix: str) -> list[Curve]:
    if rung == "babyai" and prefix == "episode-level":
        seeds = record["episode-level references (docs/results/reading-the-goal/records.json)"]
        runs = list(next(iter(seeds.values())).values())
        return [[(e["version"], e["success"], None) for e in run] for run in runs]
    return [
        [(e["version"], e["success"], e.get("minutes")) for e in run["eval"]]
        for name, run in record["runs"].items()
        if name.startswith(prefix)
    ]


def _band(curves: list[Curve], x: int) -> tuple[list[float], list[float], list[float], list[float]]:
    versions = sorted({p[0] for c in curves for p in c})
    xs, mid, lo, hi = [], [], [], []
    for v in versions:
        points = [p for c in curves for p in c if p[0] == v]
        where = [float(w) for p in points if (w := p[x]) is not None]
        if not where:
            continue
        ys = [p[1] for p in points]
        xs.append(mean(where))
        mid.append(mean(ys))
        lo.append(min(ys))
        hi.append(max(ys))
    return xs, mid, lo, hi


def draw(record: dict[str, Any], rung: str, out: Path) -> Path | None:
    spec = RUNGS[rung]
    arms = {label: _curves(record, rung, prefix) for label, prefix in spec["arms"].items()}
    arms = {label: curves for label, curves in arms.items() if curves}
    if not arms:
        return None
    # runs without times take the step-credit arm's minutes at the same version
    times = {p[0]: p[2] for c in arms.get("step credit", []) for p in c if p[2] is not None}
    borrowed = []
    for label, curves in arms.items():
        if all(p[2] is None for c in curves for p in c):
            arms[label] = [[(v, s, times.get(v)) for v, s, _ in c] for c in curves]
            borrowed.append(label)
    sticks = record["yardsticks"][spec["yardstick"]]
    fig = Figure(figsize=(11, 4.2))
    for i, (x, xlabel) in enumerate(((0, "learner step"), (2, "minutes of RL"))):
        ax = fig.add_subplot(1, 2, i + 1)
        for label, curves in arms.items():
            xs, mid, lo, hi = _band(curves, x)
            seeds = len(curves)
            note = " (minutes: step credit's)" if x == 2 and label in borrowed else ""
            (line,) = ax.plot(xs, mid, marker="o", label=f"{label}, {seeds} seeds{note}")
            ax.fill_between(xs, lo, hi, alpha=0.15, color=line.get_color())
        ax.axhline(sticks["chance"], color="grey", ls="--", lw=1, label="chance")
        ax.axhline(sticks[spec["rule"]], color="black", ls=":", lw=1, label="scripted rule")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("held-out success")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    for ax in fig.axes:
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{spec['title']}: mean over seeds, band = min-max")
    fig.tight_layout()
    path = out / f"{rung}_bands.png"
    fig.savefig(path, dpi=110)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Path(__file__).resolve().parents[1] / "docs/results/step-credit/records.json"
    parser.add_argument("--records", type=Path, default=default)
    args = parser.parse_args()
    record = json.loads(args.records.read_text())
    for rung in RUNGS:
        path = draw(record, rung, args.records.parent)
        print(path or f"{rung}: no runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
