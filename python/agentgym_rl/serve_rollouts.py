"""`agentgym-rl serve-rollouts`: one rollout process (vLLM engine, env pool, dispatcher, stream).

Only argparse runs at parse time; pydantic loads the config, then the heavy stack is imported.
Exit codes: 0 done, 2 bad config.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", metavar="FILE", help="rollout YAML (e.g. configs/rollout/babyai_tiny.yaml)"
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="run the reference's synchronous loop instead (batched turns, thread-pool HTTP "
        "env clients, the batch waits for its slowest episode): a baseline",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="override a config value by its key path, e.g. buffer.max_staleness=4 "
        "'scaling_inter.stages=[5, 10]' (values are YAML)",
    )


def run(args: argparse.Namespace) -> int:
    from agentgym_rl.config import load_rollout_config
    from agentgym_rl.config.startup import load_checked

    config = load_checked("serve-rollouts", load_rollout_config, args.config, args.overrides)
    if config is None:
        return 2
    import logging

    import uvloop

    from agentgym_rl.rollout.service import serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    uvloop.run(serve(config, sync=args.sync))
    return 0
