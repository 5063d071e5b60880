"""The `agentgym-rl` command: the parser of `commands.COMMANDS`, and the call of the chosen one."""

from __future__ import annotations

import argparse
import gc
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


def run() -> None:
    """The console script (and `python -m agentgym_rl.cli`): `main`, then exit with its code.

    Everything allocated is frozen first, so the interpreter's last full garbage collection
    skips it: in a process holding torch, Megatron or vLLM that collection alone took 1.5 s
    of every exit on 2 cores (0.2 s frozen), and the command's work is done and closed by then.
    In-process callers of `main` keep the usual collection."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
