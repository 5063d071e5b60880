"""`agentgym-rl learn`: the learner process (one rank; run under torchrun for tp/dp > 1).

Only argparse runs at parse time; pydantic loads the config, then torch/Megatron are imported.
Exit codes: 0 done, 2 bad config, missing model directory, nothing to resume, or no secret where
one is required (`auth`), 3 no groups
arrived for `receive.idle_timeout_s` (checkpointed first: `--resume` continues).
"""

from __future__ import annotations

import argparse
import sys

NAME = "learn"
HELP = "train the policy on streamed groups and publish new weights"
CHILDREN = ""  # torchrun or `train` starts it
DESCRIPTION = (
    "Receives GRPO groups from rollout servers, drops stale and malformed ones (counted), "
    "takes one AdamW step per groups_per_step groups on a Megatron-core model, publishes "
    "HF-named weights and writes resumable checkpoints. Run under torchrun for tensor/data "
    "parallelism."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", metavar="FILE", help="learn YAML (e.g. configs/learn/babyai_tiny.yaml)"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from the newest complete checkpoint under checkpoint.dir (none: start)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="override a config value by its key path, e.g. optimizer.lr=1e-5 max_steps=10",
    )


def run(args: argparse.Namespace) -> int:
    from agentgym_rl.config import load_learn_config
    from agentgym_rl.config.startup import load_checked, parallel_misfit

    config = load_checked("learn", load_learn_config, args.config, args.overrides)
    if config is None:
        return 2
    from agentgym_rl.auth import SecretError, secret_for

    try:
        secret = secret_for(
            config.auth.secret_file,
            config.endpoints,
            allow_unauthenticated=config.auth.allow_unauthenticated,
            role="learn",
        )
    except SecretError as e:
        print(f"learn: {e}", file=sys.stderr)
        return 2
    misfit = parallel_misfit(config.model, config.parallel.tp, config.parallel.pp)
    if misfit is not None:
        print(f"learn: {misfit}", file=sys.stderr)
        return 2
    import logging

    from agentgym_rl.learner.service import run_learner
    from agentgym_rl.learner.trainer import IdleTimeout
    from agentgym_rl.processes.orphans import end_with_torchrun

    end_with_torchrun()  # its own session: a killed torchrun's group signal would miss it

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        run_learner(config, resume=args.resume, secret=secret)
    except IdleTimeout as exc:
        logging.getLogger("learn").error("%s", exc)
        return 3
    return 0
