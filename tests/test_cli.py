"""The console command."""

from __future__ import annotations

import subprocess
import sys

from agentgym_rl.cli import build_parser


def test_help_lists_subcommands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentgym_rl.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in ("bench", "info"):
        assert name in out


def test_bench_rejects_unknown_benchmark() -> None:
    parser = build_parser()
    try:
        parser.parse_args(["bench", "--only", "nope"])
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("unknown benchmark accepted")
