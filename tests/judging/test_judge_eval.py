"""`agentgym-rl eval` scoring with a judge too: a scripted chat policy (tests/scripted_chat.py)
plays BabyAI on the project's env server, and the oracle judge (tests/scripted_judge.py, with an
API key) scores every episode over the same OpenAI path a model judge takes. The report puts the
judge beside the env: the oracle agrees on every episode, and a judge that is down leaves the
episodes unjudged (the evaluation itself goes on)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgym_rl.cli import main
from agentgym_rl.processes.ports import free_port
from asgi_procs import AsgiProc

pytestmark = pytest.mark.process
KEY_ENV = "AGENTGYM_RL_TEST_JUDGE_KEY"


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    chat = AsgiProc("scripted_chat:app", ready_path="/v1/models").start()
    judge = AsgiProc("scripted_judge:app", {"JUDGE_KEY": "sesame"}, ready_path="/stats").start()
    yield f"{chat.url}/v1", f"{judge.url}/v1"
    chat.stop()
    judge.stop()


def run_eval(
    servers: tuple[str, str], babyai_server, tmp_path: Path, judge_url: str | None = None
) -> dict:
    chat, judge = servers
    out = tmp_path / "eval"
    argv = ["eval", "--api-base", chat, "--api-model", "scripted", "--no-progress"]
    argv += ["--split", "envs/agentgym_envs/babyai/data/goto_test.json", "--limit", "12"]
    argv += ["--env-address", f"babyai={babyai_server.zmq}", "--out", str(out), "--turn-cap", "3"]
    argv += ["--judge-model", "oracle", "--judge-url", judge_url or judge]
    argv += ["--judge-key-env", KEY_ENV, "--no-yardsticks"]
    assert main(argv) == 0
    return json.loads((out / "eval.json").read_text())


def test_eval_puts_the_judge_beside_the_env(
    servers: tuple[str, str], babyai_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sesame")
    data = run_eval(servers, babyai_server, tmp_path)
    episodes = data["episodes"]
    assert len(episodes) == 12 and all(e["judged"] in (0.0, 1.0) for e in episodes)
    assert all((e["judged"] == 1.0) == e["success"] for e in episodes)
    agreement = data["judge"]["all"]
    assert agreement["episodes"] == 12 and agreement["agreement"] == 1.0
    c = agreement["confusion"]
    assert c["judge_only"] == c["env_only"] == 0 and c["both"] + c["neither"] == 12
    assert 0 < c["both"] < 12, "the scripted policy wins some tasks and loses others"
    assert agreement["correlation"] > 0.9
    counters = data["meta"]["judge"]  # what the judge cost
    assert counters["judge_calls"] == counters["judged_episodes"] == 12
    assert counters["judge_prompt_tokens"] > 0 and counters["judge_failed_groups"] == 0
    md = (tmp_path / "eval" / "eval.md").read_text()
    assert "**judge** (success at score >= 0.5)" in md and "| babyai | 12 |" in md


def test_a_judge_that_is_down_leaves_the_episodes_unjudged(
    servers: tuple[str, str], babyai_server, tmp_path: Path
) -> None:
    data = run_eval(servers, babyai_server, tmp_path, f"http://127.0.0.1:{free_port()}/v1")
    assert len(data["episodes"]) == 12 and all(e["judged"] is None for e in data["episodes"])
    assert "judge" not in data
