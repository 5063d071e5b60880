"""`agentgym-rl serve-rollouts`: one rollout process (vLLM engine, env pool, dispatcher, stream).

Only argparse runs at parse time; pydantic loads the config, then the heavy stack is imported.
Exit codes: 0 done, 1 vLLM did not start (one line naming the model and the cause; the traceback
is logged at debug level), 2 bad config (including a context longer than the model's, turns
of `engine.max_tokens_per_turn` that leave no room in it, or no secret where one is required),
3 authentication with the learner failed (the two hold different secrets, or one has none),
143 SIGTERM and 130 SIGINT before the loop ran (vLLM's engine processes are stopped first; once
the loop runs, either drains it and the exit is 0).
"""

from __future__ import annotations

import argparse

NAME = "serve-rollouts"
HELP = "generate rollouts continuously and stream finished groups to learners"
CHILDREN = "vLLM's engine core, the agent commands of `agents:`"
DESCRIPTION = (
    "Starts the vLLM engine and the env pool, runs episodes under staleness admission with "
    "ScalingInter turn caps, and streams finished GRPO groups to the learner endpoints. "
    "SIGTERM stops admission, finishes or aborts in-flight episodes and flushes."
)


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
        "'scaling_inter.turn_caps=[5, 10]' (values are YAML)",
    )


def run(args: argparse.Namespace) -> int:
    import sys

    from agentgym_rl.config import load_rollout_config
    from agentgym_rl.config.startup import context_misfit, load_checked, turn_misfit

    config = load_checked("serve-rollouts", load_rollout_config, args.config, args.overrides)
    if config is None:
        return 2
    from agentgym_rl.auth import SecretError, secret_for

    try:
        secret_for(
            config.auth.secret_file,
            config.endpoints,
            allow_unauthenticated=config.auth.allow_unauthenticated,
            role="serve-rollouts",
        )
    except SecretError as e:
        print(f"serve-rollouts: {e}", file=sys.stderr)
        return 2
    engine = config.engine
    misfit = context_misfit(
        config.model, engine.max_model_len, "engine.max_model_len"
    ) or turn_misfit(
        config.model,
        engine.max_model_len,
        engine.max_tokens_per_turn,
        "engine.max_tokens_per_turn",
        "engine.max_model_len",
    )
    if misfit:
        print(f"serve-rollouts: {misfit}", file=sys.stderr)
        return 2
    import logging

    import uvloop

    from agentgym_rl._core import AuthenticationError
    from agentgym_rl.inference.engine import EngineStartError
    from agentgym_rl.rollout.service import serve
    from agentgym_rl.weights.signing import Unauthenticated

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    _exit_on_sigterm()
    try:
        uvloop.run(serve(config, sync=args.sync))
    except EngineStartError as e:
        print(f"serve-rollouts: {e}", file=sys.stderr)
        return 1
    except (AuthenticationError, Unauthenticated) as e:
        print(f"serve-rollouts: authentication failed: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:  # Ctrl-C before the loop's own handlers took over (they drain)
        print("serve-rollouts: stopped by SIGINT before its loop ran", file=sys.stderr)
        return 130
    return 0


def _exit_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C until the running loop's own handlers take over (they drain):
    while vLLM starts, the default action would kill this process alone and orphan the engine
    core and its worker; unwinding lets vLLM stop them. With the supervisor dead, nobody waits
    for that: the process group ends at once (`die_if_orphaned`)."""
    import signal
    import sys

    from agentgym_rl.processes.orphans import die_if_orphaned

    def on_sigterm(*_: object) -> None:
        die_if_orphaned()
        sys.exit(128 + signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
