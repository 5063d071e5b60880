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
    import signal
    import threading

    from agentgym_rl.learner.checkpoint import resume_latest
    from agentgym_rl.learner.trainer import IdleTimeout, Trainer
    from agentgym_rl.wire import GroupReceiver
    from agentgym_rl.wire.ledger import GroupLedger

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    trainer = Trainer(config)
    if trainer.is_rank0:
        trainer.intake.ledger = GroupLedger(config.log_dir)
        trainer.receiver = GroupReceiver(
            config.receive.bind, window=config.receive.window, secret=secret
        )
        if config.weights is not None:
            from agentgym_rl.weights.publisher import WeightPublisher

            w = config.weights
            trainer.publisher = WeightPublisher(
                w.endpoint, fanout=w.fanout, relay_stall_s=w.relay_stall_s, secret=secret
            )
    if args.resume:
        found = resume_latest(trainer, config.checkpoint.dir)
        logging.getLogger("learn").info("resumed from %s", found or "nothing (fresh start)")
        if trainer.intake.ledger is not None:
            trainer.intake.ledger.write({"resumed_from": trainer.step})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        trainer.run(stop)
    except IdleTimeout as exc:
        logging.getLogger("learn").error("%s", exc)
        return 3
    finally:
        if trainer.intake.ledger is not None:
            trainer.intake.ledger.close()
        if trainer.receiver is not None:
            trainer.receiver.close()
        if trainer.publisher is not None:
            trainer.publisher.close()
        trainer.close()
    return 0
