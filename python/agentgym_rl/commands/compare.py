"""`agentgym-rl compare`: the asynchronous design against the reference's synchronous regime.

The work is `experiments.compare.compare_regimes` (see its contract); a comparison can be spread
over several sittings: rerunning runs only what is missing. Exit codes: 0 done, 1 a run failed
or was stopped, 2 bad arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "compare"
HELP = (
    "the async design against the reference's synchronous regime: train both on one config "
    "at an injected env latency, plot held-out success against wall-clock minutes"
)
CHILDREN = "the `train` runs it compares"
DESCRIPTION = (
    "Runs `train` on --config in both modes (async, sync), --runs times each, with the env "
    "servers' injected step latency, then writes REPORT/compare.png (held-out success "
    "against wall-clock minutes), compare.md / compare.json (minutes to reach the sync "
    "runs' final success, seconds per step, engine and learner idle shares, ratios) and "
    "each run's records. Finished runs are kept: rerun to continue a comparison."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        default="configs/train/babyai_goto.yaml",
        metavar="FILE",
        help="the train config both regimes run (default: the README's BabyAI run)",
    )
    parser.add_argument(
        "--out", default="runs/compare", metavar="DIR", help="where the runs live (runs/compare)"
    )
    parser.add_argument(
        "--report",
        metavar="DIR",
        help="where the figure, the table and the runs' records go (default: OUT/report)",
    )
    parser.add_argument("--runs", type=int, default=2, help="runs per regime (default 2)")
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=500.0,
        help="median injected env step latency in ms (default 500)",
    )
    parser.add_argument(
        "--latency-sigma",
        type=float,
        default=1.0,
        help="log-normal shape of the latency; larger = longer tail (default 1.0)",
    )
    parser.add_argument(
        "--eval-every",
        type=int,
        default=10,
        help="held-out evaluation every N versions in both regimes (default 10)",
    )
    parser.add_argument(
        "--only", choices=("async", "sync"), help="run only this regime (the report has both)"
    )
    parser.add_argument(
        "--report-only", action="store_true", help="run nothing: rebuild the report"
    )


def run(args: argparse.Namespace) -> int:
    import sys

    from agentgym_rl.experiments.compare import CompareError, CompareOptions, compare_regimes

    options = CompareOptions(
        config=Path(args.config),
        out=Path(args.out),
        report=Path(args.report) if args.report else None,
        runs=args.runs,
        latency_ms=args.latency_ms,
        latency_sigma=args.latency_sigma,
        eval_every=args.eval_every,
        only=args.only,
        report_only=args.report_only,
    )
    try:
        table = compare_regimes(options)
    except ValueError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    except CompareError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 1
    print(table.read_text())
    print(f"compare: figure {options.report_dir / 'compare.png'}, table {table}")
    return 0
