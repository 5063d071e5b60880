"""A judge asking a real OpenAI-compatible server (tests/scripted_judge.py in its own uvicorn
process, with an API key): per-episode and group scores, env failures left unjudged, requests
bounded in flight, retries with backoff through 503s, one more ask after an unreadable reply,
and a group that cannot be judged failing visibly (never a silent 0)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from agentgym_rl.judging.client import ChatEndpoint
from agentgym_rl.judging.judge import Judge, JudgeFailed
from agentgym_rl.judging.rubric import Transcript
from agentgym_rl.processes.ports import free_port
from asgi_procs import AsgiProc

pytestmark = pytest.mark.process

KEY_ENV = "AGENTGYM_RL_TEST_JUDGE_KEY"
WON = Transcript("Goal: go to the red ball.", (("Action: go forward", "You completed the goal."),))
LOST = Transcript("Goal: go to the red ball.", (("Action: turn left", "You ran out of steps."),))


@pytest.fixture(scope="module")
def server() -> Iterator[AsgiProc]:
    proc = AsgiProc("scripted_judge:app", env={"JUDGE_KEY": "sesame"}, ready_path="/stats")
    yield proc.start()
    proc.stop()


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sesame")


def stats(server: AsgiProc) -> dict[str, int]:
    return json.loads(server.get("/stats")[1])


def judge(url: str, model: str, **kw: object) -> Judge:
    endpoint_kw = {k: kw.pop(k) for k in ("max_in_flight", "retries", "key_env") if k in kw}
    endpoint_kw.setdefault("key_env", KEY_ENV)
    endpoint = ChatEndpoint(url, model, backoff_s=0.01, **endpoint_kw)  # type: ignore[arg-type]
    return Judge(endpoint, **kw)  # type: ignore[arg-type]


def test_episodes_are_scored_alone_and_env_failures_are_not_asked(server: AsgiProc) -> None:
    j = judge(f"{server.url}/v1", "oracle")
    verdicts = asyncio.run(j.judge([WON, None, LOST]))
    assert verdicts[1] is None
    assert [v.score for v in (verdicts[0], verdicts[2]) if v is not None] == [1.0, 0.0]
    assert verdicts[0] is not None and verdicts[0].mode == "episode"
    assert "You completed the goal." in verdicts[0].prompt and verdicts[0].reply == "SCORE: 1"
    c = j.counters
    assert (c.calls, c.judged, c.retries, c.unparsed, c.failed_groups) == (2, 2, 0, 0, 0)
    assert c.prompt_tokens > 0 and c.completion_tokens == 4
    assert stats(server)["requests:oracle"] == 2


def test_a_group_is_ranked_in_one_call(server: AsgiProc) -> None:
    j = judge(f"{server.url}/v1/chat/completions", "oracle-group", mode="group")
    verdicts = asyncio.run(j.judge([LOST, WON, LOST, None]))
    assert [v.score if v else None for v in verdicts] == [0.0, 1.0, 0.0, None]
    assert {v.reply for v in verdicts if v} == {"1: 0\n2: 1\n3: 0"}
    assert stats(server)["requests:oracle-group"] == 1 and j.counters.calls == 1


def test_requests_stay_bounded_in_flight(server: AsgiProc) -> None:
    j = judge(server.url + "/v1", "oracle-slow0.3", max_in_flight=2)
    verdicts = asyncio.run(j.judge([WON] * 6))
    assert all(v is not None and v.score == 1.0 for v in verdicts)
    assert stats(server)["max_open:oracle-slow0.3"] == 2


def test_503s_are_retried_with_backoff(server: AsgiProc) -> None:
    j = judge(server.url + "/v1", "oracle-flaky2", retries=3)
    (verdict,) = asyncio.run(j.judge([WON]))
    assert verdict is not None and verdict.score == 1.0
    assert (j.counters.calls, j.counters.retries) == (1, 2)


def test_an_unreadable_reply_is_asked_again_once(server: AsgiProc) -> None:
    j = judge(server.url + "/v1", "oracle-once")
    (verdict,) = asyncio.run(j.judge([LOST]))
    assert verdict is not None and verdict.score == 0.0
    assert (j.counters.calls, j.counters.unparsed) == (2, 1)

    bad = judge(server.url + "/v1", "garbage", mode="group")
    with pytest.raises(JudgeFailed) as failed:
        asyncio.run(bad.judge([WON, LOST]))
    assert failed.value.kind == "unparsable" and "did not parse twice" in str(failed.value)
    assert (bad.counters.calls, bad.counters.unparsed, bad.counters.failed_groups) == (2, 2, 1)


def test_a_wrong_key_fails_at_once_and_a_dead_judge_after_its_retries(
    server: AsgiProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "wrong")
    before = stats(server)["requests"]
    j = judge(server.url + "/v1", "oracle-key", retries=3)
    with pytest.raises(JudgeFailed) as failed:
        asyncio.run(j.judge([WON]))
    assert failed.value.kind == "unavailable" and "HTTP 401" in str(failed.value)
    assert stats(server)["requests"] == before + 1  # not retried

    dead = judge(f"http://127.0.0.1:{free_port()}/v1", "oracle", retries=2)
    with pytest.raises(JudgeFailed) as failed:
        asyncio.run(dead.judge([WON, LOST]))
    assert failed.value.kind == "unavailable" and "failed 3 times" in str(failed.value)
    assert dead.counters.failed_groups == 1 and dead.counters.judged == 0
