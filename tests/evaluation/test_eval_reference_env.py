"""`agentgym-rl eval` end to end against AgentGym's own BabyAI server (the stand-in of
tests/agentgym_reference.py in a real uvicorn process: no `/health`) with a scripted chat API
(tests/scripted_chat.py): the episodes are played, and env failures are reported with their
reason instead of a silent 0%."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgym_rl.cli import main
from asgi_procs import AsgiProc

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def chat_api() -> Iterator[str]:
    """A scripted model that thinks 0.3 s per reply."""
    variables = {"SCRIPTED_DELAY_S": "0.3"}
    proc = AsgiProc("scripted_chat:app", variables, ready_path="/v1/models").start()
    yield f"{proc.url}/v1"
    proc.stop()


@pytest.fixture
def split(tmp_path: Path) -> Path:
    path = tmp_path / "split.json"
    rows = [{"item_id": f"babyai_{i}", "category": "GoTo"} for i in range(3)]
    path.write_text(json.dumps(rows))
    return path


def eval_argv(chat_api: str, split: Path, address: str, out: Path) -> list[str]:
    argv = ["eval", "--api-base", chat_api, "--api-model", "scripted", "--split", str(split)]
    return [*argv, "--env-address", f"babyai={address}", "--n", "2", "--out", str(out)]


def test_eval_plays_against_the_reference_babyai_server(
    chat_api: str, split: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = AsgiProc("agentgym_reference:app", {"AGENTGYM_REFERENCE_ENV": "babyai"}).start()
    try:
        assert server.get("/health")[0] == 404
        out = tmp_path / "eval"
        # one episode at a time: the evaluation outlasts the pool's first health checks (1 s),
        # which used to mark this server down (GET /health -> 404) and fail every later episode
        argv = [*eval_argv(chat_api, split, server.url, out), "--concurrency", "1"]
        assert main([*argv, "--no-progress"]) == 0
    finally:
        server.stop()
    printed = capsys.readouterr().out
    data = json.loads((out / "eval.json").read_text())
    assert data["statuses"] == {"done": 6}, data["statuses"]
    assert data["env_failures"] == {"episodes": 0, "reasons": {}}
    row = next(r for r in data["rows"] if r["category"] == "all")
    assert (row["avg"], row["pass"], row["mean_reward"]) == (1.0, 1.0, 0.9)
    assert "failed in the env" not in printed


def test_eval_says_how_many_episodes_failed_in_the_env_and_why(
    chat_api: str, split: Path, tmp_path: Path, free_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"http://127.0.0.1:{free_port}"
    out = tmp_path / "eval"
    assert main(eval_argv(chat_api, split, dead, out)) == 0  # progress on: it prints reasons
    captured = capsys.readouterr()
    data = json.loads((out / "eval.json").read_text())
    assert data["statuses"] == {"env_failure": 6}
    assert data["env_failures"]["episodes"] == 6
    reasons = data["env_failures"]["reasons"]
    assert all(r.startswith("create: ") and dead in r for r in reasons), reasons
    assert all(e["failure"] in reasons for e in data["episodes"])
    # the first creates found nothing listening; later ones found the server marked down for it
    refused = [r for r in reasons if "create connection failed (not sent)" in r]
    assert refused, reasons
    down = f'create: no server of environment "babyai" is up: {dead} marked down: create '
    assert all(r in refused or r.startswith(down) for r in reasons), reasons
    # the summary under the table, and the progress display's lines on stderr
    assert "**6 of 6 episodes failed in the env** (status `env_failure`" in captured.out
    assert (out / "eval.md").read_text() in captured.out
    printed = [line for line in captured.err.splitlines() if line.startswith("env failure: ")]
    assert printed and all(line.removeprefix("env failure: ") in reasons for line in printed)
    assert "env failures 6: create: " in captured.err  # the bar's count
