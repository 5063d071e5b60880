"""`agentgym-rl eval --api-base`: chat completions against a real `vllm serve` of the tiny model,
with the env server started by eval itself. Accounting is asserted, not success."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgym_rl.cli import main
from agentgym_rl.policy_creation import create_tiny_model
from agentgym_rl.processes.ports import free_port
from vllm_fixtures import tiny_corpus

pytestmark = pytest.mark.engine

SPLIT = Path(__file__).resolve().parents[2] / "envs/agentgym_envs/babyai/data/goto_test.json"


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`vllm serve` (the OpenAI api_server module) of the tiny model; yields its /v1 base."""
    model = create_tiny_model(
        tmp_path_factory.mktemp("tiny-api"), corpus=tiny_corpus(), vocab_size=320, seed=0
    )
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)]
    cmd += ["--served-model-name", "tiny", "--dtype", "float32", "--port", str(port)]
    cmd += ["--host", "127.0.0.1", "--max-model-len", "2048", "--enforce-eager"]
    cmd += ["--kv-cache-memory-bytes", str(256 << 20), "--max-num-seqs", "16"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 400
        while True:
            assert proc.poll() is None, f"vllm serve exited:\n{log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                assert time.monotonic() < deadline, "vllm serve not ready in 400 s"
                time.sleep(0.5)  # readiness polling interval
        yield base
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.mark.slow
def test_api_eval_with_self_started_env_server(
    api_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "eval"
    argv = ["eval", "--api-base", api_server, "--api-model", "tiny", "--split", str(SPLIT)]
    argv += ["--limit", "3", "--n", "2", "--turn-cap", "2", "--max-tokens-per-turn", "48"]
    argv += ["--temperature", "1.0", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    # babyai declares a rule: chance and the rule stand beside the policy's Avg@n
    assert printed.startswith("| env | category | tasks | Avg@2 | chance | rule | Pass@2 |")
    assert (out / "yardsticks.json").exists()
    data = json.loads((out / "eval.json").read_text())
    tasks = json.loads(SPLIT.read_text())[:3]
    assert data["n"] == 2 and data["meta"]["policy"] == "tiny"
    assert [e["item_id"] for e in data["episodes"]] == [t["item_id"] for t in tasks for _ in "ab"]
    # every episode reached the env and the model: none failed on the way
    assert set(data["statuses"]) <= {"done", "turn_cap", "truncated"}
    row = next(r for r in data["rows"] if r["category"] == "all")
    assert (row["tasks"], row["samples"]) == (3, 6)
    assert (out / "eval.md").read_text() in printed
    assert (out / "env-babyai.log").exists()  # eval started the server itself
    assert not (out / "episodes.jsonl").exists()  # text path: no token-level episodes


@pytest.mark.slow
def test_api_errors_are_one_message(api_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "--api-base", api_server, "--api-model", "nope", "--split", str(SPLIT)]
    argv += ["--env-address", "babyai=tcp://127.0.0.1:1", "--no-progress"]
    assert main(argv) == 2
    assert "--api-model 'nope': not served by" in capsys.readouterr().err
    argv = ["eval", "--api-base", "http://127.0.0.1:1/v1", "--api-model", "x", "--split"]
    argv += [str(SPLIT), "--env-address", "babyai=tcp://127.0.0.1:1", "--no-progress"]
    assert main(argv) == 2
    assert "unreachable" in capsys.readouterr().err
