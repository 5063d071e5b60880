"""The console command."""

from __future__ import annotations

import json
import os
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
