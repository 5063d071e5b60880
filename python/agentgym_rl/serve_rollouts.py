"""`agentgym-rl serve-rollouts`: one rollout process (vLLM engine, env pool, dispatcher, stream).

Only argparse runs at parse time; pydantic loads the config, then the heavy stack is imported.
Exit codes: 0 done, 2 bad config.
"""

from __future__ import annotations

import argparse
import sys


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


def missing_model(model: object) -> str | None:
    """Why `model` cannot be loaded locally, or None. Nothing is fetched from a hub, so the
    model must be a local HF checkpoint directory."""
    from pathlib import Path

    path = Path(str(model))
    if not path.is_dir():
        return (
            f"model directory {str(path)!r} not found. Point `model=` at a local HF checkpoint "
            "(config.json, safetensors, tokenizer.json with a chat template), or create a small "
            "one with agentgym_rl.model.factory.create_tiny_model."
        )
    for needed in ("config.json", "tokenizer.json"):
        if not (path / needed).is_file():
            return f"model directory {str(path)!r} has no {needed}: it is not an HF checkpoint"
    return None


def run(args: argparse.Namespace) -> int:
    from agentgym_rl.config import ConfigError, load_rollout_config

    try:
        config = load_rollout_config(args.config, args.overrides)
    except ConfigError as e:
        print(f"serve-rollouts: {e}", file=sys.stderr)
        return 2
    problem = missing_model(config.model)
    if problem:
        print(f"serve-rollouts: {problem}", file=sys.stderr)
        return 2
    import logging

    import uvloop

    from agentgym_rl.rollout.service import serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    uvloop.run(serve(config, sync=args.sync))
    return 0
