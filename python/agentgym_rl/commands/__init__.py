"""The `agentgym-rl` subcommands: one module each, registered from `COMMANDS`.

Contract: a command module has `NAME` (the subcommand), `HELP` (its line in `agentgym-rl
--help`), `CHILDREN` (the processes it starts, "" for none: the CLI runs a command that starts any
inside `processes.ownership.owning()`, so none outlives it; docs/architecture.md lists them),
`DESCRIPTION` (its own `--help`), `add_arguments(parser)` and `run(args) -> exit code`.
Only argparse runs at parse time: a module imports its stack inside `run`, and only the chosen
command's arguments are built (some are made from the typed configs, which load pydantic), so
`agentgym-rl --help` and a command's parsing stay fast and a command needs only its own
dependencies. Library units never import a command (tests/test_layering.py).
"""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import Protocol, cast

from agentgym_rl.commands import (
    chaos,
    compare,
    env,
    evaluate,
    info,
    init_model,
    job,
    launch,
    learn,
    plot,
    secret,
    serve_rollouts,
    show,
    soak,
    status,
    train,
    view,
)


class Command(Protocol):
    NAME: str
    HELP: str
    CHILDREN: str
    DESCRIPTION: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _commands(*modules: ModuleType) -> tuple[Command, ...]:
    return tuple(cast(Command, m) for m in modules)


COMMANDS = _commands(
    serve_rollouts,
    learn,
    train,
    launch,
    status,
    chaos,
    compare,
    plot,
    evaluate,
    show,
    view,
    init_model,
    secret,
    soak,
    info,
    env,
    job,
)
"""In the order `agentgym-rl --help` lists them."""


def add_commands(
    subparsers: argparse._SubParsersAction,  # type: ignore[type-arg]
    only: str | None = None,
) -> None:
    """One subparser per command of `COMMANDS`, its handler as `func`; with `only`, the other
    commands get their line in `--help` but no arguments (they are not being parsed)."""
    for command in COMMANDS:
        parser = subparsers.add_parser(
            command.NAME, help=command.HELP, description=command.DESCRIPTION
        )
        if only is None or only == command.NAME:
            command.add_arguments(parser)
        parser.set_defaults(func=command.run, children=command.CHILDREN)
