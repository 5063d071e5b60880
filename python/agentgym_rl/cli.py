"""The `agentgym-rl` command: the parser of `commands.COMMANDS`, and the call of the chosen one."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentgym_rl.commands import COMMANDS, add_commands


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given the `argv` it will parse, only the chosen command's arguments
    are built (the first word of `argv` that names a command)."""
    parser = argparse.ArgumentParser(
        prog="agentgym-rl",
        description="Train LLM agents with multi-turn RL: asynchronous rollouts, Rust core.",
    )
    names = {command.NAME for command in COMMANDS}
    chosen = next((a for a in argv if a in names), None) if argv is not None else None
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_commands(subparsers, only=chosen if argv is not None else None)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from agentgym_rl.processes.ownership import owning

    given = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(given).parse_args(given)
    if not args.children:
        return int(args.func(args))
    with owning():  # nothing the command starts outlives it, however it ends
        return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
