"""`agentgym-rl secret PATH`: write a new run secret for a split cluster (file mode 0600)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "secret"
HELP = "write a new secret that signs a split cluster's group and weight messages"
CHILDREN = ""
DESCRIPTION = (
    "Writes 256 random bits as hex to PATH, readable by its owner only (0600). Every learn "
    "and serve-rollouts process of the run names the file in its config (auth.secret_file) "
    "or receives the secret in AGENTGYM_RL_SECRET; never on the command line. `train` "
    "makes a new secret for each run by itself."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="file to create (its folder is created too)")
    parser.add_argument(
        "--force", action="store_true", help="replace the secret in an existing file"
    )


def run(args: argparse.Namespace) -> int:
    from agentgym_rl.auth import SecretError, write_secret_file

    try:
        path = write_secret_file(args.path, overwrite=args.force)
    except (SecretError, OSError) as e:
        print(f"secret: {e}", file=sys.stderr)
        return 2
    print(
        f"wrote a new secret to {path} (mode 0600). Copy it to every machine of the run and "
        f"name it in each learn and serve-rollouts config:\n  auth:\n    secret_file: {path}"
    )
    return 0
