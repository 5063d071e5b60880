"""`agentgym-rl env list|serve`: the environment-server subcommands.

The servers live in the repository's `envs/` folder (package `agentgym_envs`), which this module
puts on `sys.path`. Only argparse runs at parse time; the server stack is imported by `serve`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ENVS_DIR = Path(__file__).resolve().parents[2] / "envs"


def _envs_on_path() -> bool:
    if not (ENVS_DIR / "agentgym_envs").is_dir():
        return False
    if str(ENVS_DIR) not in sys.path:
        sys.path.insert(0, str(ENVS_DIR))
    return True


def _list(_: argparse.Namespace) -> int:
    from agentgym_envs import ENVS

    for name, (_, _, description) in sorted(ENVS.items()):
        print(f"{name:<12} {description}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from agentgym_envs.server.options import serve_from_args

    return serve_from_args(args)


def _missing(_: argparse.Namespace) -> int:
    print(
        f"env servers not found: expected the repository's envs/ folder at {ENVS_DIR}",
        file=sys.stderr,
    )
    return 2


def add_env_subcommands(subparsers: argparse._SubParsersAction) -> None:
    """Add `env list` and `env serve NAME [...]` to the top-level `subparsers`."""
    env = subparsers.add_parser("env", help="list or serve environments (AgentGym HTTP + ZeroMQ)")
    sub = env.add_subparsers(dest="env_command", metavar="ENV_COMMAND", required=True)
    found = _envs_on_path()
    sub.add_parser("list", help="list the environments that can be served").set_defaults(
        func=_list if found else _missing
    )
    serve = sub.add_parser(
        "serve",
        help="serve one environment until SIGTERM/SIGINT",
        description="Serves NAME over the AgentGym HTTP protocol and, with --zmq-port, the native "
        "ZeroMQ protocol, from one process (envs/agentgym_envs/server/PROTOCOL.md).",
    )
    if not found:
        serve.add_argument("rest", nargs=argparse.REMAINDER)
        serve.set_defaults(func=_missing)
        return
    from agentgym_envs.server.options import add_serve_arguments

    add_serve_arguments(serve)
    serve.set_defaults(func=_serve)
