"""`agentgym-rl status RUN_DIR`: where a run stands, from its folder alone (a run on this machine
or a job on a cluster whose run folder is shared).

Exit codes: 0 the folder holds a run, 2 it does not.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

NAME = "status"
HELP = "show a run's progress line from its folder (train runs and launched jobs)"
CHILDREN = ""
DESCRIPTION = (
    "Prints the scheduler's job (for a launched run), the learner's step out of max_steps and "
    "the progress line `train` shows (success, reward, tokens/s, staleness, the latest eval), "
    "and how each start of the run ended. --follow prints a new line each time it changes."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="the run folder (train's run_dir)")
    parser.add_argument(
        "--follow", action="store_true", help="keep printing until the run ends (Ctrl-C stops)"
    )
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between checks")


def run(args: argparse.Namespace) -> int:
    from agentgym_rl.supervise.status import RunStatus

    try:
        status = RunStatus(args.run_dir)
    except FileNotFoundError as e:
        print(f"status: {e}", file=sys.stderr)
        return 2
    print(status.header())
    last = ""
    while True:
        line = status.line()
        if line != last:
            print(line, flush=True)
            last = line
        if not args.follow or status.ended():
            break
        try:
            time.sleep(args.interval)
        except KeyboardInterrupt:
            break
    for ended in status.starts():
        print(ended)
    return 0
