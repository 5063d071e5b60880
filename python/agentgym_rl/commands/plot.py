"""`agentgym-rl plot RUN_DIR [RUN_DIR ...] [--out DIR]`: regenerate a run's plots and summary,
or overlay several runs' curves (e.g. ScalingInter against a fixed turn cap) in one folder;
`--group LABEL=GLOB ... --out DIR`: runs grouped by label (seeds of one schedule), drawn as mean
and band."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "plot"
HELP = "regenerate a run's plots and summary, or overlay several runs"
CHILDREN = ""
DESCRIPTION = (
    "RUN_DIR: writes RUN_DIR/plots/*.png and RUN_DIR/summary.md; several runs with --out "
    "DIR: their curves overlaid in DIR. --group LABEL=GLOB (repeated) --out DIR: the runs of "
    "each label (e.g. the seeds of one schedule) as the mean and the min-max band of their "
    "held-out success against step and wall-clock minutes (bands.png), with a table "
    "(bands.md, bands.json); runs evaluated at several test-time turn caps (eval --run RUN "
    "--turn-cap A --turn-cap B --out RUN/turn-caps) add success against cap (turn_caps.png)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN_DIR", help="run folders of `train`")
    parser.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="LABEL=GLOB",
        help="a label and the run folders it covers, e.g. 'ScalingInter=runs/si-seed*' "
        "(repeat for each label; needs --out)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write here (needed to overlay several runs; default: RUN_DIR/plots and "
        "RUN_DIR/summary.md of a single run)",
    )


def run(args: argparse.Namespace) -> int:
    if args.group:
        return _bands(args)
    if not args.runs:
        print("plot: give RUN_DIR(s) or --group LABEL=GLOB", file=sys.stderr)
        return 2
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


def _bands(args: argparse.Namespace) -> int:
    from agentgym_rl.experiments.bands import group_runs, write_bands

    if args.out is None or args.runs:
        print("plot: --group takes no RUN_DIR and needs --out DIR", file=sys.stderr)
        return 2
    try:
        groups = group_runs(args.group)
    except ValueError as e:
        print(f"plot: {e}", file=sys.stderr)
        return 2
    for path in write_bands(groups, Path(args.out)):
        print(path)
    return 0
