"""The `agentgym-rl` command: the parser of `commands.COMMANDS`, and the call of the chosen one."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentgym_rl.commands import add_commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentgym-rl",
        description="Train LLM agents with multi-turn RL: asynchronous rollouts, Rust core.",
    )
    add_commands(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
