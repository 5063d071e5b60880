"""`agentgym-rl plot RUN_DIR [RUN_DIR ...] [--out DIR]`: regenerate a run's plots and summary,
or overlay several runs' curves (e.g. ScalingInter against a fixed turn cap) in one folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "plot"
HELP = "regenerate a run's plots and summary, or overlay several runs"
DESCRIPTION = (
    "RUN_DIR: writes RUN_DIR/plots/*.png and RUN_DIR/summary.md; several runs with --out "
    "DIR: their curves overlaid in DIR."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders of `train`")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write here (needed to overlay several runs; default: RUN_DIR/plots and "
        "RUN_DIR/summary.md of a single run)",
    )


def run(args: argparse.Namespace) -> int:
    runs = [Path(r) for r in args.runs]
    missing = [str(r) for r in runs if not r.is_dir()]
    if missing:
        print(f"plot: not a folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    if len(runs) > 1 and args.out is None:
        print("plot: overlaying several runs needs --out DIR", file=sys.stderr)
        return 2
    from agentgym_rl.report import write_overlay, write_report

    if args.out is None:
        written = write_report(runs[0])
    else:
        written = write_overlay(runs, Path(args.out))
    if not written:
        print("plot: nothing to plot (no metrics found)", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0
