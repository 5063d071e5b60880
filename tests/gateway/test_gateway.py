"""The OpenAI-compatible endpoint through the `openai` package's own client: chat, streaming,
tools, concurrent calls of one episode, interleaved episodes; the trained ids are the engine's
sampled ids and only they are masked; rewritten history forks; errors are OpenAI's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from agentgym_rl import _core
from agentgym_rl.episode.tools import ToolFamily
from agentgym_rl.episode.types import Generation
from agentgym_rl.gateway.app import Gateway
from agentgym_rl.gateway.episodes import AgentEpisode
from agentgym_rl.trajectory import ChatTokenizer
from scripted_engine import ScriptedEngine, check_sample_arrays

TOKEN = "t0ken"
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the index.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}


def policy(prompt: str, request_id: str) -> str:
    """A tool call while the prompt offers tools and no result came back yet, else text."""
    if "<tools>" in prompt and "<tool_response>" not in prompt:
        return '<tool_call>\n{"name": "search", "arguments": {"query": "lamps"}}\n</tool_call>'
    return f"Answer {prompt.count('<|im_start|>assistant')}."


class Recorded:
    """The gateway and what it produced: the engine's generations and finished samples."""

    def __init__(self, chat: ChatTokenizer) -> None:
        self.engine = ScriptedEngine(chat, policy)
        self.generations: list[Generation] = []
        generate = self.engine.generate

        async def recording(prompt_ids: list[int], **kwargs: Any) -> Generation:
            gen = await generate(prompt_ids, **kwargs)
            self.generations.append(gen)
            return gen

        self.engine.generate = recording  # type: ignore[method-assign]
        self.samples: dict[str, list[_core.Sample]] = {}
        self.gateway = Gateway(
            self.engine,
            chat,
            model="policy",
            max_model_len=2048,
            max_tokens_per_turn=64,
            family=ToolFamily.HERMES,
            token=TOKEN,
            on_finished=self._finished,
        )

    def _finished(self, episode: AgentEpisode, samples: list[_core.Sample]) -> None:
        self.samples[episode.key] = samples

    def client(self, token: str = TOKEN) -> openai.AsyncOpenAI:
        transport = httpx.ASGITransport(app=self.gateway)
        http = httpx.AsyncClient(transport=transport, base_url="http://gateway")
        return openai.AsyncOpenAI(base_url="http://gateway/v1", api_key=token, http_client=http)

    async def reward(self, key: str, value: Any) -> httpx.Response:
        transport = httpx.ASGITransport(app=self.gateway)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
            return await http.post(
                f"/v1/episodes/{key}/reward", json={"reward": value}, headers=headers
            )


@pytest.fixture
def rec(chat: ChatTokenizer) -> Recorded:
    return Recorded(chat)


def run(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(make(), 30.0))


START = [
    {"role": "system", "content": "You find lamps."},
    {"role": "user", "content": "Any lamps under 20?"},
]


def sampled(sample: _core.Sample) -> list[list[int]]:
    return [sample.input_ids[a:b].tolist() for a, b in sample.turn_spans.reshape(-1, 2)]


def test_an_agent_loop_with_tools_trains_exactly_the_sampled_ids(rec: Recorded) -> None:
    async def agent() -> Any:
        client = rec.client()
        messages: list[dict[str, Any]] = list(START)
        first = await client.chat.completions.create(
            model="policy", messages=messages, tools=[SEARCH], user="ep-1"
        )
        call = first.choices[0].message
        assert first.choices[0].finish_reason == "tool_calls" and call.content is None
        [tool_call] = call.tool_calls or []
        assert (tool_call.function.name, json.loads(tool_call.function.arguments)) == (
            "search",
            {"query": "lamps"},
        )
        # the client sends its reply back re-serialised, as agents do
        messages += [
            call.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": tool_call.id, "content": "desk lamp: 12"},
        ]
        second = await client.chat.completions.create(
            model="policy", messages=messages, tools=[SEARCH], user="ep-1"
        )
        assert second.choices[0].message.content == "Answer 2."
        return (await rec.reward("ep-1", 1.0)).json()

    assert run(agent) == {"episode": "ep-1", "reward": 1.0, "samples": 1}
    [sample] = rec.samples["ep-1"]
    check_sample_arrays(sample)
    assert sampled(sample) == [g.token_ids for g in rec.generations]
    assert (sample.reward, sample.status, sample.turns, sample.drift) == (1.0, "done", 2, False)
    text = rec.engine.chat.decode(sample.input_ids.tolist())
    assert '"name": "search"' in text.split("<|im_end|>")[0]  # the schema, in the system turn
    assert "<tool_response>\ndesk lamp: 12\n</tool_response>" in text


def test_streaming_gives_the_same_reply_in_chunks(rec: Recorded) -> None:
    async def agent() -> tuple[str, list[Any]]:
        client = rec.client()
        stream = await client.chat.completions.create(
            model="policy", messages=START, stream=True, extra_headers={"X-Episode-Key": "s"}
        )
        chunks = [c async for c in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
        tools = await client.chat.completions.create(
            model="policy", messages=START, tools=[SEARCH], stream=True, user="s2"
        )
        return text, [c async for c in tools]

    text, tool_chunks = run(agent)
    assert text == "Answer 1." and len(tool_chunks) >= 3
    calls = [tc for c in tool_chunks for tc in c.choices[0].delta.tool_calls or []]
    assert [c.function.name for c in calls] == ["search"]
    assert tool_chunks[-1].choices[0].finish_reason == "tool_calls"


def test_concurrent_calls_and_interleaved_episodes(rec: Recorded) -> None:
    rec.engine.delay_s = 0.05

    async def agent() -> None:
        client = rec.client()
        # two sub-agents of episode A at once, and episode B's two turns between them
        _, _, b1 = await asyncio.gather(
            client.chat.completions.create(model="policy", messages=START, user="A"),
            client.chat.completions.create(model="policy", messages=START, user="A"),
            client.chat.completions.create(model="policy", messages=START, user="B"),
        )
        follow = [*START, b1.choices[0].message.model_dump(exclude_none=True)]
        follow.append({"role": "user", "content": "And under 10?"})
        await client.chat.completions.create(model="policy", messages=follow, user="B")
        for key in ("A", "B"):
            assert (await rec.reward(key, 0.5)).status_code == 200

    run(agent)
    assert len(rec.samples["A"]) == 2 and len(rec.samples["B"]) == 1
    assert [s.turns for s in rec.samples["B"]] == [2]
    trained = [ids for s in [*rec.samples["A"], *rec.samples["B"]] for ids in sampled(s)]
    assert sorted(map(tuple, trained)) == sorted(tuple(g.token_ids) for g in rec.generations)


def test_rewritten_history_forks_and_is_counted(rec: Recorded) -> None:
    async def agent() -> dict[str, int]:
        client = rec.client()
        first = await client.chat.completions.create(model="policy", messages=START, user="R")
        reply = first.choices[0].message.model_dump(exclude_none=True)
        edited = {**reply, "content": "A summary of what I said."}
        more = {"role": "user", "content": "Go on."}
        await client.chat.completions.create(
            model="policy", messages=[*START, edited, more], user="R"
        )
        forks = dict(rec.gateway.episodes["R"].forks)
        assert (await rec.reward("R", 0.0)).status_code == 200
        return forks

    assert run(agent) == {"rewrite": 1}
    one, two = rec.samples["R"]
    assert (one.turns, two.turns) == (1, 1) and not one.drift and not two.drift
    # the rewritten reply is context in the second segment, never trained
    assert "A summary of what I said." in rec.engine.chat.decode(
        two.input_ids[two.loss_mask == 0].tolist()
    )
    assert np.all(two.loss_mask[: two.turn_spans[0]] == 0)


def test_bad_requests_get_openai_errors_and_lose_nothing(rec: Recorded) -> None:
    async def agent() -> None:
        client = rec.client()
        with pytest.raises(openai.AuthenticationError):
            await rec.client("wrong").chat.completions.create(
                model="policy", messages=START, user="x"
            )
        with pytest.raises(openai.BadRequestError, match="name the call's episode"):
            await client.chat.completions.create(model="policy", messages=START)
        with pytest.raises(openai.BadRequestError, match="unknown message role"):
            await client.chat.completions.create(
                model="policy", messages=[{"role": "robot", "content": "hi"}], user="x"
            )
        assert (await rec.reward("nobody", 1.0)).status_code == 404
        await client.chat.completions.create(model="policy", messages=START, user="E")
        assert (await rec.reward("E", "high")).status_code == 400
        assert (await rec.reward("E", 1.0)).status_code == 200
        again = await rec.reward("E", 1.0)
        assert again.status_code == 409 and "already has its reward" in again.text
        with pytest.raises(openai.ConflictError, match="has ended"):
            await client.chat.completions.create(model="policy", messages=START, user="E")
        models = await client.models.list()
        assert [m.id for m in models.data] == ["policy"]

    run(agent)
    assert list(rec.samples) == ["E"] and len(rec.samples["E"]) == 1  # trained once


def test_text_completions_extend_their_prompt_token_in_token_out(rec: Recorded) -> None:
    async def agent() -> None:
        client = rec.client()
        first = await client.completions.create(model="policy", prompt="Q: lamps?\nA:", user="T")
        text = first.choices[0].text
        prompt = f"Q: lamps?\nA:{text}\nQ: cheaper?\nA:"
        second = await client.completions.create(model="policy", prompt=prompt, user="T")
        assert second.choices[0].text
        stream = await client.completions.create(
            model="policy", prompt="Unrelated.", user="T", stream=True
        )
        chunks = [c async for c in stream]
        assert "".join(c.choices[0].text for c in chunks) == rec.engine.chat.decode(
            [i for i in rec.generations[-1].token_ids if i != rec.engine.chat.eos_token_id]
        )
        assert chunks[-1].choices[0].finish_reason == "stop"
        assert dict(rec.gateway.episodes["T"].forks) == {"branch": 1}
        assert (await rec.reward("T", 1.0)).status_code == 200

    run(agent)
    long, short = rec.samples["T"]
    assert (long.turns, short.turns) == (2, 1) and not long.drift and not short.drift
    trained = [ids for s in (long, short) for ids in sampled(s)]
    assert trained == [g.token_ids for g in rec.generations]
    check_sample_arrays(long)


def test_ended_episodes_are_remembered_within_a_bound(
    rec: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentgym_rl.gateway import app

    monkeypatch.setattr(app, "FINISHED_KEPT", 2)
    for key in ("a", "b", "c"):
        rec.gateway.open(key, version=0)
        rec.gateway.reward(key, {"reward": 0.0})
    assert list(rec.gateway.finished) == ["b", "c"]  # a long run does not grow
