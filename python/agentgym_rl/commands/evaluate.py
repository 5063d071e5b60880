"""`agentgym-rl eval`: Avg@n / Pass@n of a local checkpoint or an OpenAI-compatible endpoint.

Only argparse runs at parse time; `agentgym_rl.evaluation.job.run_evaluation` does the work (start
vLLM under this module's `__main__`-guarded entry point). Exit codes: 0 done, 1 vLLM did not
start (one line naming the model and the cause; `--verbose` adds the traceback), 2 bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentgym_rl.config.evaluate import EvalOptions

NAME = "eval"
HELP = "Avg@n and Pass@n per env and category for a checkpoint or an API model"
CHILDREN = (
    "vLLM's engine core (with `--model`), the env servers it starts for missing `--env-server`s"
)
DESCRIPTION = (
    "Runs every task of a split n times with the training agent loop on a local checkpoint "
    "(vLLM) or over an OpenAI-compatible chat endpoint, starts the env servers it is not "
    "given, prints the table and writes eval.md/eval.json. See docs/eval.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from agentgym_rl.config.evaluate import EvalOptions
    from agentgym_rl.config.flags import add_flags
    from agentgym_rl.config.rollout import DEFAULT_TURN_CAPS, EngineConfig

    add_flags(parser, EvalOptions, exclude=("engine", "turn_cap"))
    parser.add_argument(
        "--turn-cap",
        dest="turn_caps",
        type=int,
        action="append",
        metavar="N",
        help=f"turns per episode (default {DEFAULT_TURN_CAPS[-1]}; with --run: the run's); "
        "repeatable: the policy at each cap on one engine, and success against cap in "
        "caps.md/caps.json (each cap's files in OUT/cap-N/)",
    )
    run = parser.add_argument_group("a train run's checkpoint (instead of --model)")
    run.add_argument(
        "--run",
        type=Path,
        metavar="RUN_DIR",
        help="a train run's latest checkpoint, evaluated as the run evaluated it: its held-out "
        "split, env options, system prompt, turn cap and decoding (flags given override them)",
    )
    run.add_argument("--step", type=int, metavar="N", help="with --run: step N's checkpoint")
    add_flags(
        parser.add_argument_group("engine (the local engine's; an API's requests)"), EngineConfig
    )
    parser.add_argument(
        "--verbose", action="store_true", help="debug logging; tracebacks of start-up errors"
    )


def eval_options(args: argparse.Namespace) -> EvalOptions:
    """The options the flags ask for: a run's own (`--run`) with the flags given over them, or
    the flags alone. A value that does not validate raises `ConfigError` naming its flag."""
    from agentgym_rl.config.evaluate import EvalError, EvalOptions
    from agentgym_rl.config.flags import from_flags
    from agentgym_rl.config.rollout import EngineConfig
    from agentgym_rl.evaluation.from_run import options_for_run

    caps = {"turn_cap": args.turn_caps[0]} if args.turn_caps else {}
    if args.run is None:
        if args.step is not None:
            raise EvalError("--step needs --run RUN_DIR")
        return from_flags(EvalOptions, args, engine=from_flags(EngineConfig, args), **caps)
    if hasattr(args, "model") or hasattr(args, "api_base"):
        raise EvalError("give one of --run RUN_DIR, --model DIR or --api-base URL")
    split = {"split": args.split} if hasattr(args, "split") else {}
    base = options_for_run(args.run, args.step, **split)
    return from_flags(
        EvalOptions,
        args,
        base=base,
        engine=from_flags(EngineConfig, args, base=base.engine),
        env_options=[*base.env_options, *getattr(args, "env_options", [])],
        **caps,
    )


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import sys
    import traceback

    from agentgym_rl.config.evaluate import EvalError
    from agentgym_rl.episode.log import EPISODES_FILE
    from agentgym_rl.evaluation.job import run_evaluation
    from agentgym_rl.evaluation.turn_caps import sweep_turn_caps
    from agentgym_rl.inference.engine import EngineStartError
    from agentgym_rl.processes.env_servers import EnvServerError
    from agentgym_rl.processes.interrupt import interruptible

    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")

    try:
        options = eval_options(args)
    except (ValueError, EvalError) as e:  # ConfigError is a ValueError: it names the flag
        print(f"eval: {e}", file=sys.stderr)
        return 2
    caps = sorted(set(args.turn_caps or ()))
    try:
        with interruptible("eval") as stop:
            if len(caps) > 1:
                sweep = asyncio.run(sweep_turn_caps(options, caps))
            else:
                report = asyncio.run(run_evaluation(options))
    except KeyboardInterrupt:  # SIGINT or SIGTERM: vLLM and the env servers are stopped
        kept = ""
        if options.out is not None:
            kept = f"; the episodes it finished are in {options.out / EPISODES_FILE}"
        name = stop.signal.name if stop.signal else "SIGINT"
        print(f"eval: stopped by {name} before its report{kept}", file=sys.stderr)
        return stop.exit_code or 130
    except (EvalError, EnvServerError) as e:
        print(f"eval: {e}", file=sys.stderr)
        return 2
    except EngineStartError as e:
        if args.verbose:
            traceback.print_exception(e)
        print(f"eval: {e}", file=sys.stderr)
        return 1
    if len(caps) > 1:
        print(sweep.to_markdown(), end="")
        if options.out is not None:
            out = options.out
            print(f"wrote {out / 'caps.md'}, {out / 'caps.json'} and cap-N/ per cap")
        return 0
    print(report.to_markdown(), end="")
    if options.out is not None:
        print(f"wrote {options.out / 'eval.md'} and {options.out / 'eval.json'}")
    return 0
