"""`agentgym-rl learn` end to end: a subprocess fed over tcp, checkpoints, then --resume."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from trainer_fixtures import make_group

from agentgym_rl.learner.checkpoint_dirs import complete_checkpoints
from agentgym_rl.wire import GroupSender, encode_group
from vllm_fixtures import tiny_corpus
from waiting import wait_until

pytestmark = pytest.mark.engine


def _learn(model: Path, tmp: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    args = [
        "--config",
        "configs/learn/babyai_tiny.yaml",
        f"model={model}",
        f"receive.bind=tcp://127.0.0.1:{port}",
        "weights=null",
        f"checkpoint.dir={tmp / 'ckpt'}",
        "checkpoint.every_steps=1",
        f"log_dir={tmp / 'logs'}",
        "optimizer.warmup_steps=0",
        *extra,
    ]
    return subprocess.Popen(
        [sys.executable, "-m", "agentgym_rl.cli", "learn", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_listening(port: int, proc: subprocess.Popen[str], timeout_s: float = 120.0) -> None:
    """Until the learner's receiver is bound (its start-up imports take a while)."""

    def bound() -> bool:
        assert proc.poll() is None, proc.communicate()[0]
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_until(bound, timeout_s, "the learner binds its receive endpoint", poll_s=0.2)


def _feed(port: int, groups: int, vocab: int, proc: subprocess.Popen[str]) -> str:
    _wait_listening(port, proc)
    with GroupSender(f"tcp://127.0.0.1:{port}", "cli-test") as sender:
        sender.wait_connected(60)
        for g in range(groups):
            sender.send(encode_group(make_group(g, vocab=vocab)), timeout_s=60)
        out, _ = proc.communicate(timeout=120)
    return out


@pytest.mark.slow
def test_learn_trains_checkpoints_and_resumes(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, free_port: int
) -> None:
    from agentgym_rl.policy_creation import create_tiny_model

    model = create_tiny_model(
        tmp_path_factory.mktemp("cli-tiny"), corpus=tiny_corpus(), vocab_size=320, seed=0
    )
    vocab = int(json.loads((model / "config.json").read_text())["vocab_size"])
    proc = _learn(model, tmp_path, free_port, "max_steps=2")
    out = _feed(free_port, 4, vocab, proc)
    assert proc.returncode == 0, out
    assert [s for s, _ in complete_checkpoints(tmp_path / "ckpt")] == [1, 2]

    proc = _learn(model, tmp_path, free_port, "max_steps=3", "--resume")
    out = _feed(free_port, 2, vocab, proc)
    assert proc.returncode == 0, out
    assert "resumed from" in out and "step_2" in out
    steps = [json.loads(x)["step"] for x in (tmp_path / "logs" / "metrics.jsonl").open()]
    assert steps == [1, 2, 3]
    assert [s for s, _ in complete_checkpoints(tmp_path / "ckpt")] == [1, 2, 3]


@pytest.mark.slow
def test_learn_idle_timeout_checkpoints_and_exits_3(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, free_port: int
) -> None:
    from agentgym_rl.policy_creation import create_tiny_model

    model = create_tiny_model(
        tmp_path_factory.mktemp("cli-idle"), corpus=tiny_corpus(), vocab_size=320, seed=0
    )
    vocab = int(json.loads((model / "config.json").read_text())["vocab_size"])
    extra = ("max_steps=5", "receive.idle_timeout_s=2", "receive.poll_s=0.1")
    proc = _learn(model, tmp_path, free_port, *extra)
    out = _feed(free_port, 2, vocab, proc)  # one step, then the fleet goes quiet
    assert proc.returncode == 3, out
    assert "no usable group for 2 s: no groups arrive from any rollout server" in out
    assert "received so far: 2 groups, 2 used" in out
    assert [s for s, _ in complete_checkpoints(tmp_path / "ckpt")] == [1]
