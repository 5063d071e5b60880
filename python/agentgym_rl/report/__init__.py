"""Plots and summaries of runs: `write_report(run_dir)` after `train`, `agentgym-rl plot`.

`write_report(run_dir)` writes run_dir/plots/*.png, run_dir/summary.md and summary.json;
`write_overlay(run_dirs, out_dir)` overlays several runs' curves in `out_dir` (e.g. a
ScalingInter schedule against a fixed turn cap) with a summary.json per run inside.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from agentgym_rl.report.plots import write_plots
from agentgym_rl.report.records import RunRecords
from agentgym_rl.report.summary import summarize, write_summary


def write_report(run_dir: Path) -> list[Path]:
    """Plots and summary of one run; returns the files written."""
    run = RunRecords.load(run_dir)
    plots = write_plots([run], run_dir / "plots")
    return [*plots, *write_summary(run, plots)]


def write_overlay(run_dirs: Sequence[Path], out_dir: Path) -> list[Path]:
    """The runs' curves overlaid in `out_dir`, plus `summaries.json` (one entry per run)."""
    runs = [RunRecords.load(d) for d in run_dirs]
    plots = write_plots(runs, out_dir)
    path = out_dir / "summaries.json"
    path.write_text(json.dumps({r.name: summarize(r) for r in runs}, indent=2) + "\n")
    return [*plots, path]


__all__ = ["RunRecords", "summarize", "write_overlay", "write_plots", "write_report"]
