"""The console command."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym_rl.cli import build_parser
from agentgym_rl.commands import COMMANDS

pytestmark = pytest.mark.process


def test_help_lists_subcommands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentgym_rl.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    listed = out.split("COMMAND", 2)[2]  # after the usage line and the positional header
    for command in COMMANDS:
        assert f"    {command.NAME} " in listed or f"    {command.NAME}\n" in listed, command.NAME
    assert "    bench" not in listed  # a checkout tool: python benches/run.py


def test_every_command_module_is_registered_and_complete() -> None:
    """A module added to agentgym_rl/commands is in the table, with its help and handler."""
    import agentgym_rl.commands as package

    modules = {p.stem for p in Path(package.__file__).parent.glob("*.py")} - {"__init__"}
    registered = {c.__name__.rsplit(".", 1)[1] for c in COMMANDS}  # type: ignore[attr-defined]
    assert modules == registered
    for command in COMMANDS:
        assert command.HELP and command.DESCRIPTION and callable(command.run)
        assert isinstance(command.CHILDREN, str)
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(sub.choices) == [c.NAME for c in COMMANDS]


def test_the_stopping_table_names_every_command_that_starts_processes() -> None:
    """docs/architecture.md says what each command starts and how it ends; a command whose
    `CHILDREN` is not empty (it runs owned) has its row there."""
    text = (Path(__file__).resolve().parents[1] / "docs/architecture.md").read_text()
    table = text.split("## Stopping:", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    for command in COMMANDS:
        if command.CHILDREN:
            assert any(f"`{command.NAME}`" in row for row in rows), command.NAME


def _learn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentgym_rl.cli", "learn", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_learn_bad_config_is_one_message() -> None:
    out = _learn("--config", "configs/learn/babyai_tiny.yaml", "optimizer.decay=exp")
    assert out.returncode == 2
    assert out.stderr.startswith("learn: invalid config:") and "optimizer.decay" in out.stderr
    assert "Traceback" not in out.stderr


def test_learn_missing_model_is_one_message(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = _learn("model=" + str(tmp_path / "nope"))
    assert out.returncode == 2
    assert "model directory" in out.stderr and "Traceback" not in out.stderr


def test_learn_layout_that_does_not_fit_the_model_is_one_message(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = tmp_path / "m"
    model.mkdir()
    (model / "tokenizer.json").write_text("{}")
    sizes = {"num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2}
    (model / "config.json").write_text(json.dumps(sizes))
    for override, needle in [
        ("parallel.pp=2", "num_hidden_layers (3) does not divide by parallel.pp (2)"),
        ("parallel.tp=4", "num_key_value_heads (2) does not divide by parallel.tp (4)"),
    ]:
        out = _learn(f"model={model}", override)
        assert out.returncode == 2, out.stderr
        assert needle in out.stderr and "Traceback" not in out.stderr


def test_a_stream_beyond_this_host_without_a_secret_refuses_to_start(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = tmp_path / "m"
    model.mkdir()
    (model / "tokenizer.json").write_text("{}")
    (model / "config.json").write_text("{}")
    env = {k: v for k, v in os.environ.items() if k != "AGENTGYM_RL_SECRET"}
    cli = [sys.executable, "-m", "agentgym_rl.cli"]
    runs = {
        "learn": [*cli, "learn", f"model={model}", "receive.bind=tcp://*:5555"],
        "serve-rollouts": [
            *cli,
            "serve-rollouts",
            "--config",
            "configs/rollout/babyai_tiny.yaml",
            f"model={model}",
            "learner.endpoints=['tcp://10.0.0.7:5555']",
        ],
    }
    for role, cmd in runs.items():
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 2, out.stderr
        assert out.stderr.startswith(f"{role}: ") and "Traceback" not in out.stderr
        assert "agentgym-rl secret" in out.stderr and "allow_unauthenticated" in out.stderr
    # A secret file others may read is refused too, naming the fix.
    secret = tmp_path / "secret"
    secret.write_text("s" * 64)
    secret.chmod(0o644)
    out = subprocess.run(
        [*runs["learn"], f"auth.secret_file={secret}"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 2 and "chmod 600" in out.stderr, out.stderr
