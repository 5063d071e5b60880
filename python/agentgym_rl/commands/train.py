"""`agentgym-rl train`: the whole run on one machine, as supervised child processes.

Only argparse runs at parse time. Exit codes: 0 finished, 1 a child crashed (or the run could
not start its children), 2 bad config / missing model / busy pinned port / missing env
dependency (nothing was started), 130 / 143 stopped by SIGINT / SIGTERM (after a clean stop).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "train"
HELP = "run env servers, rollout servers and the learner together, supervised"
CHILDREN = "env servers, serve-rollouts, learn (torchrun when learner_procs > 1)"
DESCRIPTION = (
    "Starts the env servers, serve-rollouts and learn (torchrun when learner_procs > 1) as "
    "child processes on 127.0.0.1 wired over ZeroMQ, shows progress, stops everything in "
    "order on Ctrl-C/SIGTERM and writes plots and a summary at the end. See docs/train.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="train YAML (e.g. configs/train/*.yaml)")
    parser.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue a stopped run: reuse RUN_DIR/configs/train.yaml, resume the learner from "
        "its newest complete checkpoint and the rollout servers' dataset cursors",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="override a config value by its key path, e.g. learn.max_steps=50 "
        "rollout.engine.temperature=0.8 env_servers.0.replicas=2 (values are YAML)",
    )


def run(args: argparse.Namespace) -> int:
    from agentgym_rl.config.loader import ConfigError
    from agentgym_rl.supervise import PlanError
    from agentgym_rl.supervise.run import resume, train

    if (args.config is None) == (args.resume is None):
        print(
            "train: give --config FILE (a new run) or --resume RUN_DIR, not both", file=sys.stderr
        )
        return 2
    try:
        if args.resume:
            result = resume(args.resume, overrides=args.overrides, say=_say)
        else:
            result = train(Path(args.config), overrides=args.overrides, say=_say)
    except (ConfigError, PlanError) as e:
        print(f"train: {e}", file=sys.stderr)
        return 2
    return result.exit_code


def _say(line: str) -> None:
    print(line, flush=True)
