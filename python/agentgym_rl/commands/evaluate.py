"""`agentgym-rl eval`: Avg@n / Pass@n of a local checkpoint or an OpenAI-compatible endpoint.

Only argparse runs at parse time; `agentgym_rl.evaluation.job.run_evaluation` does the work (start
vLLM under this module's `__main__`-guarded entry point). Exit codes: 0 done, 1 vLLM did not
start (one line naming the model and the cause; `--verbose` adds the traceback), 2 bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentgym_rl.evaluation.job import EvalOptions

NAME = "eval"
HELP = "Avg@n and Pass@n per env and category for a checkpoint or an API model"
DESCRIPTION = (
    "Runs every task of a split n times with the training agent loop on a local checkpoint "
    "(vLLM) or over an OpenAI-compatible chat endpoint, starts the env servers it is not "
    "given, prints the table and writes eval.md/eval.json. See docs/eval.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from typing import get_args

    from agentgym_rl.config.flags import add_flags
    from agentgym_rl.config.rollout import DEFAULT_TURN_CAPS, ActionFormat, EngineConfig, ToolParser

    src = parser.add_argument_group("policy (one of)")
    src.add_argument("--model", type=Path, metavar="DIR", help="local HF checkpoint (vLLM)")
    src.add_argument(
        "--run",
        type=Path,
        metavar="RUN_DIR",
        help="a train run's latest checkpoint, evaluated as the run evaluated it: its held-out "
        "split, env options, system prompt, turn cap and decoding (flags given override them)",
    )
    src.add_argument("--step", type=int, metavar="N", help="with --run: step N's checkpoint")
    src.add_argument("--api-base", metavar="URL", help="OpenAI-compatible base, e.g. .../v1")
    src.add_argument("--api-model", metavar="NAME", help="model name at --api-base")
    src.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="environment variable holding the API key (default OPENAI_API_KEY; unset: none)",
    )
    parser.add_argument(
        "--split",
        action="append",
        help="a JSON file of {item_id, category} rows, e.g. "
        "envs/agentgym_envs/babyai/data/test.json, or ENV=NAME for a split ENV declares "
        "(maze=test); repeatable: several envs, one table each (required but with --run)",
    )
    parser.add_argument(
        "--env-address",
        action="append",
        default=[],
        metavar="ENV=ADDR",
        help="an env server (http://HOST:PORT or tcp://HOST:PORT), repeatable; envs without "
        "one are started here",
    )
    parser.add_argument("--n", type=int, help="samples per task (default 1)")
    parser.add_argument(
        "--turn-cap",
        type=int,
        action="append",
        help=f"turns per episode (default {DEFAULT_TURN_CAPS[-1]}; with --run: the run's); "
        "repeatable: the policy at each cap on one engine, and success against cap in "
        "caps.md/caps.json (each cap's files in OUT/cap-N/)",
    )
    parser.add_argument("--limit", type=int, help="only the first N tasks of the split")
    parser.add_argument("--out", type=Path, help="write eval.md, eval.json (and episodes) here")
    parser.add_argument("--concurrency", type=int, default=32, help="episodes at once")
    add_flags(
        parser.add_argument_group("engine (the local engine's; an API's requests)"), EngineConfig
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--no-yardsticks",
        action="store_true",
        help="do not show chance (random valid actions) and the env's scripted rule beside the "
        "policy (measured in this process on the same tasks and turn cap; kept in --out)",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="debug logging; tracebacks of start-up errors"
    )
    parser.add_argument(
        "--system-prompt", help="system prompt (default: the env's; give the one trained with)"
    )
    parser.add_argument(
        "--env-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="option of the env servers eval starts, e.g. observation=compact (repeatable)",
    )
    acting = parser.add_argument_group("action format")
    acting.add_argument(
        "--action-format",
        choices=[f.value for f in ActionFormat],
        help="how every env's actions are written (default: each env's own; with --run: the "
        "run's). tools: native tool calls, the env's tools offered as `tools`; an API answers "
        "with `tool_calls` and gets the results as `role: tool` messages, a local model calls "
        "them in its chat template's layout",
    )
    acting.add_argument(
        "--tool-parser",
        choices=list(get_args(ToolParser)),
        help="with --action-format tools and --model: how the model writes a call (default "
        "auto: recognised from its chat template; an API's calls come structured)",
    )
    acting.add_argument(
        "--tool-calls-per-turn",
        type=int,
        metavar="N",
        help="with --action-format tools: calls of one reply that are executed (default 1; "
        "the rest are answered 'not executed')",
    )


def parse_addresses(items: list[str]) -> dict[str, list[str]]:
    """`["babyai=tcp://h:1", "babyai=tcp://h:2"]` -> `{"babyai": [both]}`."""
    out: dict[str, list[str]] = {}
    for item in items:
        env, sep, address = item.partition("=")
        if not sep or not env or "://" not in address:
            raise ValueError(
                f"--env-address {item!r}: expected ENV=ADDR, e.g. babyai=http://127.0.0.1:36001"
            )
        out.setdefault(env, []).append(address)
    return out


def eval_options(args: argparse.Namespace) -> EvalOptions:
    """The options the flags ask for: a run's own (`--run`) with the flags given over them, or
    the flags alone."""
    from dataclasses import replace

    from agentgym_rl.config.flags import from_flags
    from agentgym_rl.config.rollout import EngineConfig
    from agentgym_rl.evaluation.from_run import options_for_run
    from agentgym_rl.evaluation.job import EvalOptions
    from agentgym_rl.evaluation.runner import EvalError

    given: dict[str, Any] = {
        key: value
        for key, value in (
            ("split", _splits(args.split)),
            ("n", args.n),
            ("turn_cap", args.turn_cap[0] if args.turn_cap else None),
            ("limit", args.limit),
            ("system_prompt", args.system_prompt),
            ("action_format", args.action_format),
            ("tool_parser", args.tool_parser),
            ("tool_calls_per_turn", args.tool_calls_per_turn),
        )
        if value is not None
    }
    common = {
        "env_addresses": parse_addresses(args.env_address),
        "out": args.out,
        "concurrency": args.concurrency,
        "progress": not args.no_progress,
        "yardsticks": not args.no_yardsticks,
    }
    if args.run is not None:
        if args.model is not None or args.api_base is not None:
            raise EvalError("give one of --run RUN_DIR, --model DIR or --api-base URL")
        base = options_for_run(args.run, args.step, **given)
        engine = from_flags(EngineConfig, args, base=base.engine)
        env_options = (*base.env_options, *args.env_option)
        return replace(base, engine=engine, env_options=env_options, **common)
    if args.step is not None:
        raise EvalError("--step needs --run RUN_DIR")
    if args.split is None:
        raise EvalError("--split is required (or --run RUN_DIR: the run's held-out split)")
    return EvalOptions(
        model=args.model,
        api_base=args.api_base,
        api_model=args.api_model,
        api_key_env=args.api_key_env,
        engine=from_flags(EngineConfig, args),
        env_options=tuple(args.env_option),
        **given,
        **common,
    )


def _splits(given: list[str] | None) -> Path | tuple[Path, ...] | None:
    if not given:
        return None
    return Path(given[0]) if len(given) == 1 else tuple(map(Path, given))


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import sys
    import traceback

    from agentgym_rl.evaluation.job import run_evaluation
    from agentgym_rl.evaluation.runner import EvalError
    from agentgym_rl.evaluation.turn_caps import sweep_turn_caps
    from agentgym_rl.inference.engine import EngineStartError
    from agentgym_rl.processes.env_servers import EnvServerError

    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")

    try:
        options = eval_options(args)
    except (ValueError, EvalError) as e:  # ConfigError is a ValueError: it names the flag
        print(f"eval: {e}", file=sys.stderr)
        return 2
    caps = sorted(set(args.turn_cap or ()))
    try:
        if len(caps) > 1:
            sweep = asyncio.run(sweep_turn_caps(options, caps))
        else:
            report = asyncio.run(run_evaluation(options))
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
        if args.out is not None:
            print(f"wrote {args.out / 'caps.md'}, {args.out / 'caps.json'} and cap-N/ per cap")
        return 0
    print(report.to_markdown(), end="")
    if args.out is not None:
        print(f"wrote {args.out / 'eval.md'} and {args.out / 'eval.json'}")
    return 0
