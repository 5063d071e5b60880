"""The OpenAI-compatible endpoint a user's agent talks to, served from the policy being trained.

Contract (an ASGI app on Starlette, served by uvicorn; its routes, errors and events in
`http.py`):
- `GET /v1/models` lists the served model; `POST /v1/chat/completions` answers one call, whole
  or streamed (`stream: true`: server-sent `chat.completion.chunk`s then `data: [DONE]`), with
  `tools` / `tool_calls` as OpenAI's API has them; `POST /v1/completions` continues a raw text
  prompt (one string, whole or streamed; `text.py`); `POST /v1/episodes/{key}/reward` with
  `{"reward": float}` ends an episode: its samples wait for `claim(key)` (the agent runner) and go
  to `on_finished` when given. `open(key, ...)` announces an episode with its version and turn
  cap (a call beyond the cap is refused); a key never announced is opened by its first call.
  `drop(key)` forgets an episode that will get no reward (counted in `dropped`).
- Every call names its episode: the `X-Episode-Key` header, else the body's `user` field, else
  `metadata.episode_key`; a call without one is refused (400). Calls of one episode may run
  concurrently; `episodes.py` keeps them token-in/token-out.
- Sampling is the run's (the engine's temperature: the learner corrects for exactly that
  distribution); a request's `max_tokens` (or `max_completion_tokens`) caps the reply.
- With a `token`, every request must carry `Authorization: Bearer <token>` (401 otherwise).
- A reward posted while a call of its episode is generating waits for it (at most
  `REWARD_WAIT_S`): the turn the agent acted on trains. A call whose episode ended while it
  generated answers 409 and trains nothing.
- Errors are OpenAI-shaped: `{"error": {"message", "type", "code"}}` with 400 (malformed
  request or a field of the wrong type, context too long), 401, 404 (unknown route or episode),
  409 (episode ended), 500 (the engine or the endpoint failed: the message says how; logged).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from agentgym_rl import _core
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.tools import ToolFamily
from agentgym_rl.episode.types import Engine, Generation
from agentgym_rl.gateway.episodes import AgentEpisode, GatewayError, Message
from agentgym_rl.gateway.http import ASGIApp, Receive, Scope, Send, application
from agentgym_rl.trajectory import ChatTokenizer

Finished = Callable[[AgentEpisode, list[_core.Sample]], None]

log = logging.getLogger(__name__)

REWARD_WAIT_S = 60.0
"""How long a posted reward waits for its episode's calls still generating."""
FINISHED_KEPT = 65_536
"""Ended episodes remembered (to refuse a second reward or a late call), newest kept."""


class Gateway:
    """The endpoint's state: engine, template, episodes by key; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        chat: ChatTokenizer,
        *,
        model: str,
        max_model_len: int,
        max_tokens_per_turn: int,
        stop_ids: Sequence[int] | None = None,
        family: ToolFamily | None = None,
        token: str | None = None,
        on_finished: Finished | None = None,
    ) -> None:
        self.engine, self.chat, self.model = engine, chat, model
        self.max_model_len, self.max_tokens_per_turn = max_model_len, max_tokens_per_turn
        eos = chat.eos_token_id
        self.stop_ids = list(stop_ids) if stop_ids is not None else ([] if eos is None else [eos])
        self.family, self.token = family, token
        self.on_finished = on_finished
        self.episodes: dict[str, AgentEpisode] = {}
        self.finished: dict[str, float] = {}
        """Key -> reward of every ended episode (a second reward is refused, not trained)."""
        self.unclaimed: dict[str, list[_core.Sample]] = {}
        self.unclaimed_forks: dict[str, int] = {}
        """Key -> segments its episode forked off, for the episode log (`claim_forks`)."""
        self.dropped = 0
        self.app: ASGIApp = application(self)

    def open(
        self,
        key: str,
        *,
        version: int,
        turn_cap: int = 0,
        stage: int = 0,
        sampling: dict[str, Any] | None = None,
        metrics: RolloutMetrics | None = None,
    ) -> None:
        """Announce episode `key`: its calls run at `version`'s budget, at most `turn_cap`, with
        `sampling` passed to every generate call, counted in `metrics`."""
        self.episodes[key] = AgentEpisode(
            key,
            self.chat,
            self.max_model_len,
            version,
            self.family,
            turn_cap,
            stage,
            dict(sampling or {}),
            stop_ids=frozenset(self.stop_ids),
            metrics=metrics,
        )

    def episode(self, key: str) -> AgentEpisode:
        if key in self.finished:
            raise GatewayError(409, f"episode {key!r} has ended (its reward was posted)")
        if key not in self.episodes:
            self.open(key, version=self.engine.version)
        return self.episodes[key]

    def drop(self, key: str) -> None:
        """Forget episode `key` (its agent failed or timed out): nothing of it trains."""
        if self.episodes.pop(key, None) is not None:
            self.dropped += 1
        self.unclaimed.pop(key, None)
        self.unclaimed_forks.pop(key, None)

    def claim(self, key: str) -> list[_core.Sample] | None:
        """The samples of episode `key` once its reward was posted (None: not yet)."""
        return self.unclaimed.pop(key, None)

    def claim_forks(self, key: str) -> int:
        """How many segments episode `key` forked off (0 when not known), once claimed."""
        return self.unclaimed_forks.pop(key, 0)

    async def complete(self, body: dict[str, Any], key: str) -> dict[str, Any]:
        """One chat completion of episode `key` (the response body, not streamed)."""
        messages, tools, limit = _messages(body), _tools(body), _sampling_limit(body)
        episode = self.episode(key)
        seg = episode.place(messages, tools)
        try:
            gen = await self._generate(episode, seg.builder.ids.tolist(), limit)
            _still_open(episode)
        except BaseException:
            episode.release(seg)
            raise
        message = episode.reply(seg, gen)
        finish = "tool_calls" if message.get("tool_calls") else _finish(gen.finish_reason)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": len(seg.builder) - len(gen.token_ids),
                "completion_tokens": len(gen.token_ids),
                "total_tokens": len(seg.builder),
            },
        }

    async def complete_text(self, body: dict[str, Any], key: str) -> dict[str, Any]:
        """One `/v1/completions` call of episode `key` (a raw text prompt, no template)."""
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise GatewayError(400, "prompt must be one non-empty string")
        limit = _sampling_limit(body)
        episode = self.episode(key)
        seg = episode.place_text(prompt)
        try:
            gen = await self._generate(episode, list(seg.ids), limit)
            _still_open(episode)
        except BaseException:
            episode.release(seg)
            raise
        text = episode.reply_text(seg, gen)
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "text": text, "finish_reason": _finish(gen.finish_reason)}],
            "usage": {
                "prompt_tokens": len(seg.ids) - len(gen.token_ids),
                "completion_tokens": len(gen.token_ids),
                "total_tokens": len(seg.ids),
            },
        }

    async def _generate(
        self, episode: AgentEpisode, ids: list[int], limit: int | None
    ) -> Generation:
        """One turn after `ids`, capped by the request's `limit` and the context left."""
        room = min(self.max_tokens_per_turn, self.max_model_len - len(ids))
        if limit is not None:
            room = min(room, limit)
        if room <= 0:
            raise GatewayError(400, "the conversation exceeds the model's context length")
        metrics = episode.metrics or RolloutMetrics()
        with metrics.generating(len(ids)):
            gen = await self.engine.generate(
                ids,
                max_tokens=room,
                request_id=f"gw-{episode.key}-{episode.calls}-{uuid.uuid4().hex[:6]}",
                **episode.sampling,
            )
        metrics.generated_tokens += len(gen.token_ids)
        return gen

    def reward(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        """Ends episode `key` with the posted reward; its samples go to `on_finished`."""
        if key in self.finished:
            raise GatewayError(409, f"episode {key!r} already has its reward")
        episode = self.episodes.get(key)
        if episode is None:
            raise GatewayError(404, f"no episode {key!r} (no call named it)", "not_found_error")
        value = body.get("reward")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise GatewayError(400, 'the body must be {"reward": <a finite number>}')
        samples = episode.finish(float(value))
        del self.episodes[key]
        self.finished[key] = float(value)
        if len(self.finished) > FINISHED_KEPT:  # a long run must not grow: forget the oldest
            del self.finished[next(iter(self.finished))]
        if self.on_finished is not None:
            self.on_finished(episode, samples)
        else:
            self.unclaimed[key] = samples
            self.unclaimed_forks[key] = sum(episode.forks.values())
        return {"episode": key, "reward": float(value), "samples": len(samples)}

    async def reward_settled(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        """`reward` once the episode's calls still generating have replied (see the module
        docstring)."""
        episode = self.episodes.get(key)
        deadline = time.monotonic() + REWARD_WAIT_S
        while episode is not None and episode.busy and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return self.reward(key, body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The endpoint as an ASGI app (`http.py`)."""
        await self.app(scope, receive, send)


def _messages(body: dict[str, Any]) -> list[Message]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise GatewayError(400, "messages must be a list of message objects")
    out = []
    for m in messages:
        if m.get("role") not in ("system", "user", "assistant", "tool"):
            raise GatewayError(400, f"unknown message role {m.get('role')!r}")
        content = m.get("content")
        if isinstance(content, list):  # content parts: their text, in order
            texts = [p.get("text", "") for p in content if isinstance(p, dict)]
            if len(texts) != len(content) or not all(isinstance(t, str) for t in texts):
                raise GatewayError(400, "content parts must be objects with a text string")
            content = "".join(texts)
        elif content is not None and not isinstance(content, str):
            raise GatewayError(400, f"message content must be a string, not {_kind(content)}")
        calls = m.get("tool_calls")
        if calls is not None and not (
            isinstance(calls, list) and all(isinstance(c, dict) for c in calls)
        ):
            raise GatewayError(400, "tool_calls must be a list of objects")
        out.append({**m, "content": content if content is not None else ""})
    return out


def _tools(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    tools = body.get("tools") or None
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(
        isinstance(t, dict)
        and isinstance(t.get("function"), dict)
        and isinstance(t["function"].get("name"), str)
        for t in tools
    ):
        raise GatewayError(400, "tools must be a list of {type: function, function: {name, ...}}")
    return tools


def _sampling_limit(body: dict[str, Any]) -> int | None:
    """The request's cap on generated tokens (`max_completion_tokens`, else `max_tokens`); the
    rest of sampling is the run's. `n` other than 1 is refused: one reply per call."""
    n = body.get("n")
    if n is not None and n != 1:
        raise GatewayError(400, "n must be 1: the endpoint samples one reply per call")
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise GatewayError(400, f"{name} must be a positive integer, not {value!r}")
        return value
    return None


def _still_open(episode: AgentEpisode) -> None:
    """A call's reply is refused when its episode's reward came in while it generated."""
    if episode.reward is not None:
        raise GatewayError(
            409, f"episode {episode.key!r} ended while this call ran; its turn is not trained"
        )


def _kind(value: Any) -> str:
    return type(value).__name__


def _finish(reason: str) -> str:
    return "length" if reason == "length" else "stop"
