"""`agentgym-rl env list|serve`: the environment-server subcommands.

The servers are the installed package `agentgym_envs` (distribution agentgym-envs, `envs/` in a
checkout), found through `agentgym_rl.env_discovery`. Only argparse runs at parse time; the server
stack is imported by `serve`.
"""

from __future__ import annotations

import argparse
import sys

from agentgym_rl.env_discovery import ENVS_PACKAGE, INSTALL_HINT, env_registry, envs_installed


def _list(_args: argparse.Namespace) -> int:
    for name, (_, _, description) in sorted(env_registry().items()):
        print(f"{name:<12} {description}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from agentgym_envs.server.options import serve_from_args

    return serve_from_args(args)


def _missing(_: argparse.Namespace) -> int:
    print(
        f"env servers not found: the package {ENVS_PACKAGE} is not installed ({INSTALL_HINT})",
        file=sys.stderr,
    )
    return 2


NAME = "env"
HELP = "list or serve environments (AgentGym HTTP + ZeroMQ)"
DESCRIPTION = (
    "The environment servers of the installed agentgym-envs package: `list`, `serve NAME`."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`env list` and `env serve NAME [...]`."""
    sub = parser.add_subparsers(dest="env_command", metavar="ENV_COMMAND", required=True)
    found = envs_installed()
    sub.add_parser("list", help="list the environments that can be served").set_defaults(
        env_run=_list if found else _missing
    )
    serve = sub.add_parser(
        "serve",
        help="serve one environment until SIGTERM/SIGINT",
        description="Serves NAME over the AgentGym HTTP protocol and, with --zmq-port, the native "
        "ZeroMQ protocol, from one process (the message schemas: PROTOCOL.md in the "
        "agentgym_envs.server package).",
    )
    if not found:
        serve.add_argument("rest", nargs=argparse.REMAINDER)
        serve.set_defaults(env_run=_missing)
        return
    from agentgym_envs.server.options import add_serve_arguments

    add_serve_arguments(serve)
    serve.set_defaults(env_run=_serve)


def run(args: argparse.Namespace) -> int:
    return int(args.env_run(args))
