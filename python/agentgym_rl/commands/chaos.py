"""`agentgym-rl chaos`: a `train` run with processes killed on purpose, and what it cost."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "chaos"
HELP = "a train run with env servers, rollout servers, the learner or train killed on purpose"
CHILDREN = "the `train` run it breaks on purpose (env servers, serve-rollouts, learn)"
DESCRIPTION = (
    "Runs `train --config FILE`, SIGKILLs the chosen children when the learner reaches the "
    "chosen steps (env and rollout servers are restarted by the supervisor, a killed "
    "learner, or a killed train whose children must end by themselves, is continued with "
    "`train --resume`), and prints for each fault the seconds "
    "until the learner stepped again and the steps lost, then where every group went. Exit "
    "0 when every fault was recovered from and the group accounting balances."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", required=True, metavar="FILE", help="train YAML (a new run_dir each time)"
    )
    parser.add_argument(
        "--fault",
        action="append",
        required=True,
        metavar="ROLE@STEP",
        help="SIGKILL the first env server (env), rollout server (rollout), the learner "
        "(learner) or train itself (train) once the learner has logged STEP; repeatable, e.g. "
        "--fault env@5 --fault rollout@10 --fault learner@15",
    )
    parser.add_argument(
        "--max-resumes", type=int, default=2, help="`train --resume` at most this many times"
    )


def run(args: argparse.Namespace) -> int:
    from agentgym_rl.experiments.chaos import TRAIN_STOP_S, Fault, run_chaos, table
    from agentgym_rl.processes.interrupt import interruptible

    try:
        faults = [Fault.parse(f) for f in args.fault]
    except ValueError as e:
        print(f"chaos: {e}", file=sys.stderr)
        return 2
    try:
        with interruptible(NAME, bound_s=TRAIN_STOP_S + 10) as stop:
            result = run_chaos(Path(args.config), faults, max_resumes=args.max_resumes, stop=stop)
    except KeyboardInterrupt:  # its train was stopped first (run_chaos)
        name = stop.signal.name if stop.signal else "SIGINT"
        print(f"chaos: stopped by {name}; its train run stopped too", file=sys.stderr)
        return stop.exit_code or 130
    print(table(result))
    recovered = all(r.recovered_s is not None for r in result.faults)
    orphans = all(r.orphans_s is not None for r in result.faults if r.fault.role == "train")
    done = (
        len(result.faults) == len(faults) and recovered and orphans and result.accounting.balanced
    )
    return 0 if done and not result.accounting.trained_twice else 1
