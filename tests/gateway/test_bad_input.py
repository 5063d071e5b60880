"""The endpoint under bad input (issue 60): every malformed, mistyped, oversized, unknown or
racing request is answered in OpenAI's error shape, none breaks the server or loses a trained
turn; an engine failure is a 500 that says what failed; a reward racing a call waits for it; a
client gone before its reply trains nothing, and nothing stays open behind it (a real uvicorn
server: tasks and descriptors counted)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
import pytest

from agentgym_rl import _core
from agentgym_rl.gateway import app as app_mod
from agentgym_rl.gateway.app import Gateway
from agentgym_rl.gateway.episodes import AgentEpisode
from agentgym_rl.gateway.serve import GatewayServer
from agentgym_rl.trajectory import ChatTokenizer
from scripted_engine import ScriptedEngine

TOKEN = "t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
START = [{"role": "user", "content": "Any lamps?"}]


def policy(prompt: str, request_id: str) -> str:
    if "explode" in prompt:
        raise RuntimeError("CUDA error: device-side assert triggered")
    return "Some lamps."


class Endpoint:
    def __init__(self, chat: ChatTokenizer, delay_s: float = 0.0) -> None:
        self.engine = ScriptedEngine(chat, policy, delay_s=delay_s)
        self.samples: dict[str, list[_core.Sample]] = {}
        self.gateway = Gateway(
            self.engine,
            chat,
            model="policy",
            max_model_len=512,
            max_tokens_per_turn=32,
            token=TOKEN,
            on_finished=self._finished,
        )

    def _finished(self, episode: AgentEpisode, samples: list[_core.Sample]) -> None:
        self.samples[episode.key] = samples

    def http(self) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.gateway)
        return httpx.AsyncClient(transport=transport, base_url="http://gw", headers=AUTH)


def chat_body(**fields: Any) -> dict[str, Any]:
    return {"model": "policy", "messages": START, "user": "E", **fields}


# (what is tried, method, path, body: a dict sent as JSON or raw bytes, status, message part)
CASES: list[tuple[str, str, str, Any, int, str]] = [
    ("malformed JSON", "POST", "/v1/chat/completions", b"{not json", 400, "not JSON"),
    ("a body over 8 MB", "POST", "/v1/chat/completions", b" " * (9 << 20), 400, "over"),
    ("a JSON array body", "POST", "/v1/chat/completions", b"[1, 2]", 400, "JSON object"),
    ("messages not a list", "POST", "/v1/chat/completions", chat_body(messages="hi"), 400, "list"),
    ("no messages", "POST", "/v1/chat/completions", chat_body(messages=[]), 400, "empty"),
    (
        "content a number",
        "POST",
        "/v1/chat/completions",
        chat_body(messages=[{"role": "user", "content": 5}]),
        400,
        "must be a string, not int",
    ),
    (
        "content parts without text",
        "POST",
        "/v1/chat/completions",
        chat_body(messages=[{"role": "user", "content": [{"text": 3}]}]),
        400,
        "content parts",
    ),
    (
        "an unknown role",
        "POST",
        "/v1/chat/completions",
        chat_body(messages=[{"role": "robot", "content": "hi"}]),
        400,
        "unknown message role",
    ),
    (
        "tool_calls not a list",
        "POST",
        "/v1/chat/completions",
        chat_body(messages=[*START, {"role": "assistant", "content": "", "tool_calls": "x"}]),
        400,
        "tool_calls",
    ),
    (
        "tools of the wrong shape",
        "POST",
        "/v1/chat/completions",
        chat_body(tools=[{"x": 1}]),
        400,
        "tools",
    ),
    ("tools not a list", "POST", "/v1/chat/completions", chat_body(tools="search"), 400, "tools"),
    (
        "max_tokens a string",
        "POST",
        "/v1/chat/completions",
        chat_body(max_tokens="9"),
        400,
        "max_tokens",
    ),
    ("max_tokens zero", "POST", "/v1/chat/completions", chat_body(max_tokens=0), 400, "positive"),
    ("n of 3", "POST", "/v1/chat/completions", chat_body(n=3), 400, "n must be 1"),
    ("stream a string", "POST", "/v1/chat/completions", chat_body(stream="yes"), 400, "stream"),
    ("no episode key", "POST", "/v1/chat/completions", {"messages": START}, 400, "name the call"),
    ("a prompt not a string", "POST", "/v1/completions", {"prompt": 7, "user": "T"}, 400, "prompt"),
    ("an unknown route", "GET", "/v1/embeddings", None, 404, "no route"),
    (
        "a reward for no episode",
        "POST",
        "/v1/episodes/nobody/reward",
        {"reward": 1},
        404,
        "no episode",
    ),
    ("a reward not a number", "POST", "/v1/episodes/E/reward", {"reward": "high"}, 400, "finite"),
    ("a NaN reward", "POST", "/v1/episodes/E/reward", b'{"reward": NaN}', 400, "finite"),
    ("an infinite reward", "POST", "/v1/episodes/E/reward", b'{"reward": Infinity}', 400, "finite"),
]


async def _send(http: httpx.AsyncClient, method: str, path: str, body: Any) -> httpx.Response:
    if isinstance(body, bytes):
        return await http.request(method, path, content=body)
    return await http.request(method, path, json=body)


def test_every_bad_request_gets_an_openai_error_and_the_endpoint_goes_on(
    chat: ChatTokenizer,
) -> None:
    ep = Endpoint(chat)

    async def main() -> None:
        async with ep.http() as http:
            assert (await http.post("/v1/chat/completions", json=chat_body())).status_code == 200
            for what, method, path, body, status, part in CASES:
                r = await _send(http, method, path, body)
                assert r.status_code == status, (what, r.text)
                error = r.json()["error"]
                assert part in error["message"], (what, error)
                assert isinstance(error["type"], str) and "code" in error, what
            # another run's token
            other = await http.post(
                "/v1/chat/completions", json=chat_body(), headers={"Authorization": "Bearer other"}
            )
            assert other.status_code == 401 and other.json()["error"]["code"] == "invalid_api_key"
            # the episode the bad calls named is intact: one more turn, then its reward
            assert (await http.post("/v1/chat/completions", json=chat_body())).status_code == 200
            assert (
                await http.post("/v1/episodes/E/reward", json={"reward": 1.0})
            ).status_code == 200
            again = await http.post("/v1/episodes/E/reward", json={"reward": 1.0})
            assert (
                again.status_code == 409
                and "already has its reward" in again.json()["error"]["message"]
            )
            late = await http.post("/v1/chat/completions", json=chat_body())
            assert late.status_code == 409

    asyncio.run(asyncio.wait_for(main(), 60))
    # the two good calls (the same messages twice: two segments), nothing else
    assert [(s.turns, s.reward) for s in ep.samples["E"]] == [(1, 1.0), (1, 1.0)]
    assert not ep.gateway.episodes and ep.engine.in_flight == 0


def test_an_engine_failure_is_a_500_that_says_what_failed(chat: ChatTokenizer) -> None:
    ep = Endpoint(chat)

    async def main() -> None:
        async with ep.http() as http:
            boom = [{"role": "user", "content": "explode"}]
            r = await http.post("/v1/chat/completions", json=chat_body(messages=boom))
            assert r.status_code == 500
            error = r.json()["error"]
            assert error["type"] == "server_error" and "device-side assert" in error["message"]
            # the segment was released: the episode goes on with a good call
            assert (await http.post("/v1/chat/completions", json=chat_body())).status_code == 200
            assert (
                await http.post("/v1/episodes/E/reward", json={"reward": 0.5})
            ).status_code == 200

    asyncio.run(asyncio.wait_for(main(), 60))
    assert [s.turns for s in ep.samples["E"]] == [1]


def test_a_reward_racing_a_call_waits_for_its_turn(chat: ChatTokenizer, monkeypatch) -> None:
    ep = Endpoint(chat, delay_s=0.3)

    async def main() -> None:
        async with ep.http() as http:
            call = asyncio.create_task(http.post("/v1/chat/completions", json=chat_body()))
            while ep.engine.in_flight == 0:
                await asyncio.sleep(0.01)
            reward = await http.post("/v1/episodes/E/reward", json={"reward": 1.0})
            assert reward.status_code == 200 and reward.json()["samples"] == 1
            assert (await call).status_code == 200

            # a call still generating past the wait (held until the reward is answered): the
            # reward ends the episode without it, and the call answers 409 (its turn is not trained)
            monkeypatch.setattr(app_mod, "REWARD_WAIT_S", 0.05)
            body = chat_body(user="F")
            assert (await http.post("/v1/chat/completions", json=body)).status_code == 200
            ep.engine.gate = asyncio.Event()
            call = asyncio.create_task(
                http.post(
                    "/v1/chat/completions",
                    json=body
                    | {
                        "messages": [
                            *START,
                            {"role": "assistant", "content": "Some lamps."},
                            {"role": "user", "content": "More?"},
                        ]
                    },
                )
            )
            while ep.engine.in_flight == 0:
                await asyncio.sleep(0.01)
            assert (
                await http.post("/v1/episodes/F/reward", json={"reward": 0.0})
            ).status_code == 200
            ep.engine.gate.set()
            late = await call
            assert (
                late.status_code == 409
                and "ended while this call ran" in late.json()["error"]["message"]
            )

    asyncio.run(asyncio.wait_for(main(), 60))
    assert [s.turns for s in ep.samples["E"]] == [1]
    assert [s.turns for s in ep.samples["F"]] == [1]  # the first call only


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_clients_gone_before_their_reply_train_nothing_and_leak_nothing(
    chat: ChatTokenizer,
) -> None:
    """A real uvicorn server: 20 clients that give up while their call generates (streamed or
    not), then one that stays. Each abandoned call is cancelled (the engine's request with it),
    its segment released, and tasks and open descriptors come back to where they were."""
    ep = Endpoint(chat, delay_s=0.5)

    async def main() -> None:
        server = await GatewayServer.start(ep.gateway)
        base = f"http://127.0.0.1:{server.port}"
        try:
            async with httpx.AsyncClient(base_url=base, headers=AUTH) as warm:
                assert (
                    await warm.post("/v1/chat/completions", json=chat_body(user="W"))
                ).status_code == 200
            await asyncio.sleep(0.2)
            tasks, fds = len(asyncio.all_tasks()), _open_descriptors()
            for i in range(20):
                async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=0.1) as http:
                    with pytest.raises(httpx.TimeoutException):
                        await http.post(
                            "/v1/chat/completions",
                            json=chat_body(user=f"G{i % 2}", stream=i % 2 == 0),
                        )
            for _ in range(100):  # the server notices each disconnect and cancels the call
                if ep.engine.in_flight == 0:
                    break
                await asyncio.sleep(0.05)
            assert ep.engine.in_flight == 0
            assert all(not e.busy for e in ep.gateway.episodes.values())
            async with httpx.AsyncClient(base_url=base, headers=AUTH) as http:
                ok = await http.post("/v1/chat/completions", json=chat_body(user="G0"))
                assert ok.status_code == 200
                r = await http.post("/v1/episodes/G0/reward", json={"reward": 1.0})
                assert r.json()["samples"] == 1
                # a streamed reply over the real server: every event, then [DONE], no length
                sse = await http.post("/v1/chat/completions", json=chat_body(user="S", stream=True))
                assert sse.status_code == 200 and "content-length" not in sse.headers
                assert sse.text.startswith("data: {") and sse.text.endswith("data: [DONE]\n\n")
            await asyncio.sleep(0.3)
            assert len(asyncio.all_tasks()) <= tasks
            assert _open_descriptors() <= fds
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 120))
    [sample] = ep.samples["G0"]
    assert sample.turns == 1  # the one reply a client received; none of the abandoned ten
    # the warm-up, that one and the streamed one: every abandoned call was cancelled
    assert ep.engine.calls == 3
