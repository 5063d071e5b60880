"""`agentgym-rl info`: the installed version."""

from __future__ import annotations

import argparse

NAME = "info"
HELP = "print the version"
CHILDREN = ""
DESCRIPTION = "Prints the installed agentgym-rl version."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No arguments."""


def run(_: argparse.Namespace) -> int:
    import agentgym_rl

    print(f"agentgym-rl {agentgym_rl.__version__}")
    return 0
