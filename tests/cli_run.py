"""`agentgym-rl ARGS` as a user's shell runs it: this Python, from the repository root, output
captured (shared by the tests that drive the command line end to end)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def agentgym_cli(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `agentgym-rl ARGS` to its end (past `timeout_s`: `subprocess.TimeoutExpired`)."""
    return subprocess.run(
        [sys.executable, "-m", "agentgym_rl.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
    )
