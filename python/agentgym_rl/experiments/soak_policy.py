"""The small policy a soak runs when given no model: `init-model` with the flags of the
`configs/train/*_tiny.yaml` runs, in a child that dies with the soak."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from agentgym_rl.processes.child import cli_argv, die_with_parent

POLICY_FLAGS = (
    "--transcripts",
    "48",
    "--turn-cap",
    "3",
    "--vocab-size",
    "800",
    "--hidden",
    "64",
    "--layers",
    "2",
    "--heads",
    "2",
    "--kv-heads",
    "2",
    "--intermediate",
    "128",
    "--warmup-steps",
    "100",
    "--warmup-batch",
    "4",
    "--warmup-lr",
    "5e-3",
    "--threads",
    "2",
)
"""A policy as small as the `configs/train/*_tiny.yaml` runs make: it answers in the env's
action format often enough that episodes step the env (a random model never does)."""


def make_policy(env: str, out: Path, env_options: Sequence[str] = ()) -> Path:
    """`init-model` for `env` into `out/<env>/model`, given the `--env-option` flags its server
    runs with (on 2 cores seconds, a web env's about 1.5 min: its transcripts are played in the
    browser); returns the folder."""
    folder = out / env / "model"
    argv = [*cli_argv("init-model", "--out", str(folder), "--env", env), *POLICY_FLAGS]
    argv += env_options
    linux = sys.platform == "linux"  # a soak killed meanwhile takes init-model with it
    done = subprocess.run(
        argv, capture_output=True, text=True, preexec_fn=die_with_parent if linux else None
    )
    if done.returncode != 0:
        raise RuntimeError(f"init-model for {env} failed:\n{done.stderr[-2000:]}")
    return folder
