"""`agentgym-rl env list|serve`: the environment-server subcommands.

The servers are the installed package `agentgym_envs` (distribution agentgym-envs, `envs/` in a
checkout) and any installed env plugin, found through its catalog (`agentgym_rl.env_discovery`).
Only argparse runs at parse time; the server stack is imported by `serve`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from agentgym_rl.env_discovery import (
    ENVS_PACKAGE,
    INSTALL_HINT,
    env_class,
    env_entries,
    envs_installed,
)


def _list(args: argparse.Namespace) -> int:
    if args.name:
        return _describe(args.name)
    broken = 0
    for name, entry in env_entries().items():
        try:
            line = env_class(name).description or "-"
        except LookupError as e:
            missing = getattr(e, "missing_module", None)
            broken += missing is None
            line = f"{'UNAVAILABLE' if missing else 'BROKEN'}: {e}"
        print(f"{name:<11} {entry.package:<22} {line}")
    return 1 if broken and args.strict else 0


def _describe(name: str) -> int:
    from agentgym_envs import describe

    try:
        facts: dict[str, Any] = describe(env_class(name))
    except LookupError as e:
        print(f"env list: {e}", file=sys.stderr)
        return 2
    options = facts.pop("options")
    free = facts.pop("options from") == "keywords"
    tools = facts.pop("tools", [])
    for key, value in facts.items():
        if isinstance(value, list | dict) and not value:
            value = "none"
        shown = ", ".join(value) if isinstance(value, list) else value
        print(f"{key + ':':<15} {json.dumps(shown) if isinstance(shown, dict) else shown}")
    if not options and free:
        print("options:        any KEY=VALUE: the env reads and checks them itself (its docs)")
    else:
        print("options:" if options else "options:        none")
    for o in options:
        extra = f" one of {', '.join(o['choices'])}" if "choices" in o else ""
        extra += f" >= {o['minimum']:g}" if "minimum" in o else ""
        print(f"  {o['name']} ({o['type']}{extra}; default {o['default']!r}) {o['help']}".rstrip())
    print("tools:" if tools else "tools:          none")
    for line in tools:
        print(f"  {line}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from agentgym_envs.server.cli import serve_from_args

    return serve_from_args(args)


def _missing(_: argparse.Namespace) -> int:
    print(
        f"env servers not found: the package {ENVS_PACKAGE} is not installed ({INSTALL_HINT})",
        file=sys.stderr,
    )
    return 2


NAME = "env"
HELP = "list or serve environments (AgentGym HTTP + ZeroMQ)"
CHILDREN = "an env's own processes under `env serve` (ScienceWorld's JVMs, web envs' Chromium)"
DESCRIPTION = (
    "The environments of the installed agentgym-envs package and of any installed env plugin "
    "(entry points of the group agentgym_rl.envs): `list`, `list -v NAME`, `serve NAME`."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`env list [-v NAME]` and `env serve NAME [...]`."""
    sub = parser.add_subparsers(dest="env_command", metavar="ENV_COMMAND", required=True)
    found = envs_installed()
    listing = sub.add_parser(
        "list",
        help="list the environments that can be served, with the package each comes from",
        description="One line per registered env: name, package, description. An env whose "
        "module needs a package not installed here is listed as UNAVAILABLE, one that fails "
        "otherwise (an error in its code, a missing method, a name two packages claim) as BROKEN, "
        "each with the reason; the others are unaffected.",
    )
    listing.add_argument(
        "-v",
        dest="name",
        metavar="NAME",
        help="describe one env (a name or module:Class): action format, prompt, splits, options",
    )
    listing.add_argument(
        "--strict", action="store_true", help="exit 1 when an env is BROKEN (for CI checks)"
    )
    listing.set_defaults(env_run=_list if found else _missing)
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
    from agentgym_envs.server.cli import add_serve_arguments

    add_serve_arguments(serve)
    serve.set_defaults(env_run=_serve)


def run(args: argparse.Namespace) -> int:
    return int(args.env_run(args))
