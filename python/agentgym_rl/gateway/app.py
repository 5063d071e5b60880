"""The OpenAI-compatible endpoint a user's agent talks to, served from the policy being trained.

Contract (an ASGI app on Starlette, served by uvicorn):
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
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentgym_rl import _core
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.tools import ToolFamily
from agentgym_rl.episode.types import Engine, Generation
from agentgym_rl.gateway.episodes import AgentEpisode, GatewayError, Message
from agentgym_rl.trajectory import ChatTokenizer

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Finished = Callable[[AgentEpisode, list[_core.Sample]], None]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 << 20
REWARD_WAIT_S = 60.0
"""How long a posted reward waits for its episode's calls still generating."""
FINISHED_KEPT = 65_536
"""Ended episodes remembered (to refuse a second reward or a late call), newest kept."""
_SSE_HEADERS = {"cache-control": "no-cache"}


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
        self.app: ASGIApp = _application(self)

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
        with metrics.generating():
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

    # --- HTTP ---

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    async def models(self, request: Request) -> Response:
        data = [{"id": self.model, "object": "model", "owned_by": "agentgym-rl"}]
        return JSONResponse({"object": "list", "data": data})

    async def chat_completions(self, request: Request) -> Response:
        return await self._completion(request, self.complete)

    async def completions(self, request: Request) -> Response:
        return await self._completion(request, self.complete_text)

    async def episode_reward(self, request: Request) -> Response:
        body = await _json_body(request)
        return JSONResponse(await self.reward_settled(request.path_params["key"], body))

    async def _completion(
        self, request: Request, complete: Callable[[dict[str, Any], str], Awaitable[dict[str, Any]]]
    ) -> Response:
        body = await _json_body(request)
        key, stream = _episode_key(request, body), _stream_flag(body)
        done = await _unless_gone(complete(body, key), request.receive)
        if done is None:  # the client is gone: nobody reads this
            return Response(status_code=499)
        if not stream:
            return JSONResponse(done)
        return StreamingResponse(
            _events(done), media_type="text/event-stream", headers=_SSE_HEADERS
        )

    def authorized(self, request: Request) -> bool:
        return self.token is None or request.headers.get("authorization") == (
            f"Bearer {self.token}"
        )


def _application(gateway: Gateway) -> ASGIApp:
    """The routes, the bearer check before any of them, and every error in OpenAI's shape."""
    routes = [
        Route("/v1/models", _failing_as_500(gateway.models), methods=["GET"]),
        Route("/v1/chat/completions", _failing_as_500(gateway.chat_completions), methods=["POST"]),
        Route("/v1/completions", _failing_as_500(gateway.completions), methods=["POST"]),
        Route(
            "/v1/episodes/{key}/reward", _failing_as_500(gateway.episode_reward), methods=["POST"]
        ),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={GatewayError: _gateway_error, HTTPException: _no_route},
    )
    app.router.redirect_slashes = False  # a trailing slash is the same route (`_Slashless`)
    return _Slashless(_Bearer(app, gateway))


def _failing_as_500(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """`handler`, its unexpected failure (the engine's, or ours) a `GatewayError` 500 that says
    what failed, logged once (Starlette would answer a bare 500 and raise it again)."""

    async def handle(request: Request) -> Response:
        try:
            return await handler(request)
        except (GatewayError, HTTPException):
            raise
        except Exception as e:
            log.exception("endpoint: %s %s failed", request.method, request.url.path)
            raise GatewayError(500, f"the endpoint failed: {type(e).__name__}: {e}") from e

    return handle


class _Bearer:
    """Every request carries the run's token (when it has one), whatever its route: 401."""

    def __init__(self, app: Starlette, gateway: Gateway) -> None:
        self.app, self.gateway = app, gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.gateway.authorized(Request(scope)):
            error = GatewayError(401, "missing or wrong bearer token", "authentication_error")
            await _error_response(error)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _Slashless:
    """`/v1/models/` is `/v1/models`: the path's trailing slash dropped before routing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and len(scope["path"]) > 1 and scope["path"].endswith("/"):
            scope = {**scope, "path": scope["path"].rstrip("/")}
        await self.app(scope, receive, send)


async def _gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    return _error_response(exc)


async def _no_route(request: Request, exc: Exception) -> Response:
    """Starlette's 404 and 405 both mean no route answers this method and path."""
    message = f"no route {request.method} {request.url.path}"
    return _error_response(GatewayError(404, message, "not_found_error"))


def _error_response(error: GatewayError) -> Response:
    code = {401: "invalid_api_key", 404: "not_found", 500: "internal_error"}.get(error.status)
    kind = "server_error" if error.status == 500 else error.kind
    body = {"error": {"message": error.message, "type": kind, "code": code}}
    return JSONResponse(body, status_code=error.status)


async def _events(done: dict[str, Any]) -> AsyncIterator[bytes]:
    """`done` (a chat or text completion) as server-sent chunks: the role, the text piece by
    piece, the calls, the end; then `data: [DONE]`."""
    head = {k: done[k] for k in ("id", "created", "model")}
    choice = done["choices"][0]
    chat = "message" in choice
    message = choice["message"] if chat else {"content": choice["text"]}
    text = message.get("content") or ""
    pieces = [text[i : i + 16] for i in range(0, len(text), 16)]
    chunks: list[dict[str, Any]]
    if chat:
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"content": p} for p in pieces]
        if message.get("tool_calls"):
            calls = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
            deltas.append({"tool_calls": calls})
        chunks = [{"index": 0, "delta": d, "finish_reason": None} for d in deltas]
        chunks.append({"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]})
    else:
        chunks = [{"index": 0, "text": p, "finish_reason": None} for p in pieces]
        chunks.append({"index": 0, "text": "", "finish_reason": choice["finish_reason"]})
    kind = "chat.completion.chunk" if chat else "text_completion"
    for c in chunks:
        event = {**head, "object": kind, "choices": [c]}
        yield f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()
    yield b"data: [DONE]\n\n"


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


def _stream_flag(body: dict[str, Any]) -> bool:
    value = body.get("stream")
    if value is not None and not isinstance(value, bool):
        raise GatewayError(400, f"stream must be true or false, not {_kind(value)}")
    return bool(value)


def _still_open(episode: AgentEpisode) -> None:
    """A call's reply is refused when its episode's reward came in while it generated."""
    if episode.reward is not None:
        raise GatewayError(
            409, f"episode {episode.key!r} ended while this call ran; its turn is not trained"
        )


def _kind(value: Any) -> str:
    return type(value).__name__


def _episode_key(request: Request, body: dict[str, Any]) -> str:
    key = request.headers.get("x-episode-key", "")
    metadata = body.get("metadata")
    in_metadata = metadata.get("episode_key") if isinstance(metadata, dict) else None
    key = key or body.get("user") or in_metadata or ""
    if not isinstance(key, str) or not key:
        raise GatewayError(
            400,
            "name the call's episode: an X-Episode-Key header, the `user` field or "
            "metadata.episode_key",
        )
    return key


async def _unless_gone(call: Awaitable[dict[str, Any]], receive: Receive) -> dict[str, Any] | None:
    """`call`'s result, or None when the client disconnected first: the call is cancelled (the
    engine aborts its request, the segment is released), so a reply nobody received never
    trains."""
    work = asyncio.ensure_future(call)
    gone = asyncio.ensure_future(_disconnect(receive))
    try:
        await asyncio.wait((work, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not work.done():
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
    return None if work.cancelled() else work.result()


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _finish(reason: str) -> str:
    return "length" if reason == "length" else "stop"


async def _json_body(request: Request) -> dict[str, Any]:
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise GatewayError(400, f"the body is over {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(raw or b"{}")
    except json.JSONDecodeError as e:
        raise GatewayError(400, f"the body is not JSON: {e.msg}") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "the body must be a JSON object")
    return body
