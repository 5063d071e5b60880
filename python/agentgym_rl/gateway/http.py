"""The endpoint's HTTP side (`app.py`'s contract), on Starlette: the routes, the bearer check
before any of them, every error in OpenAI's shape, and a completion as server-sent events.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentgym_envs.server.asgi import ASGIApp, Receive, Scope, Send, starlette_app
from agentgym_rl.gateway.episodes import GatewayError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 << 20


class Endpoint(Protocol):
    """What the routes call (`app.Gateway`)."""

    model: str
    token: str | None

    async def complete(self, body: dict[str, Any], key: str) -> dict[str, Any]: ...

    async def complete_text(self, body: dict[str, Any], key: str) -> dict[str, Any]: ...

    async def reward_settled(self, key: str, body: dict[str, Any]) -> dict[str, Any]: ...


_SSE_HEADERS = {"cache-control": "no-cache"}


async def _models(gateway: Endpoint, request: Request) -> Response:
    data = [{"id": gateway.model, "object": "model", "owned_by": "agentgym-rl"}]
    return JSONResponse({"object": "list", "data": data})


async def _chat_completions(gateway: Endpoint, request: Request) -> Response:
    return await _completion(gateway, request, gateway.complete)


async def _completions(gateway: Endpoint, request: Request) -> Response:
    return await _completion(gateway, request, gateway.complete_text)


async def _episode_reward(gateway: Endpoint, request: Request) -> Response:
    body = await _json_body(request)
    return JSONResponse(await gateway.reward_settled(request.path_params["key"], body))


async def _completion(
    gateway: Endpoint,
    request: Request,
    complete: Callable[[dict[str, Any], str], Awaitable[dict[str, Any]]],
) -> Response:
    body = await _json_body(request)
    key, stream = _episode_key(request, body), _stream_flag(body)
    done = await unless_client_gone(complete(body, key), request.receive)
    if done is None:  # the client is gone: nobody reads this
        return Response(status_code=499)
    return _EventStream(server_sent_events(done)) if stream else JSONResponse(done)


def application(gateway: Endpoint) -> ASGIApp:
    """The routes, the bearer check before any of them, and every error in OpenAI's shape."""
    routes = [
        Route("/v1/models", _failing_as_500(partial(_models, gateway)), methods=["GET"]),
        Route(
            "/v1/chat/completions",
            _failing_as_500(partial(_chat_completions, gateway)),
            methods=["POST"],
        ),
        Route("/v1/completions", _failing_as_500(partial(_completions, gateway)), methods=["POST"]),
        Route(
            "/v1/episodes/{key}/reward",
            _failing_as_500(partial(_episode_reward, gateway)),
            methods=["POST"],
        ),
    ]
    handlers = {GatewayError: _gateway_error, HTTPException: _no_route}
    return _Gate(starlette_app(routes, handlers), gateway)


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


class _Gate:
    """Before any route: every request carries the run's token (when it has one), whatever its
    route, else 401. Read from the scope itself: this runs on every call (bench_gateway.py)."""

    def __init__(self, app: ASGIApp, gateway: Endpoint) -> None:
        self.app, self.gateway = app, gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if self.gateway.token is not None:
                wanted = f"Bearer {self.gateway.token}".encode()
                if not any(k == b"authorization" and v == wanted for k, v in scope["headers"]):
                    error = GatewayError(
                        401, "missing or wrong bearer token", "authentication_error"
                    )
                    await _error_response(error)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


class _EventStream(Response):
    """A completion's server-sent events, each its own body chunk. The completion is whole
    before its first event, so nothing is generated while they go out: no disconnect listener
    beside them (Starlette's `StreamingResponse` starts one in a task group: 1.13-1.20x the bare
    baseline's p50 in bench_gateway.py, against 1.02-1.04x)."""

    media_type = "text/event-stream"

    def __init__(self, events: list[bytes]) -> None:
        # as `StreamingResponse` does: no body, so no content-length header
        self.status_code, self.background, self.events = 200, None, events
        self.init_headers(_SSE_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        for event in self.events:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


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


def server_sent_events(done: dict[str, Any]) -> list[bytes]:
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
    events = [{**head, "object": kind, "choices": [c]} for c in chunks]
    return [f"data: {json.dumps(e, ensure_ascii=False)}\n\n".encode() for e in events] + [
        b"data: [DONE]\n\n"
    ]


def _stream_flag(body: dict[str, Any]) -> bool:
    value = body.get("stream")
    if value is not None and not isinstance(value, bool):
        raise GatewayError(400, f"stream must be true or false, not {type(value).__name__}")
    return bool(value)


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


async def unless_client_gone(
    call: Awaitable[dict[str, Any]], receive: Receive
) -> dict[str, Any] | None:
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
