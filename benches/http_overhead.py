"""What the HTTP servers' framework costs: the product's Starlette app against a bare-ASGI
baseline kept here (not in the package) that does the same work, call latency at 1 and 64
concurrent callers, p50 and p99, side by side in one run (bench_gateway.py, bench_envpool.py).

Contract: `serve(app)` runs an ASGI app under uvicorn on the running loop (a free port) and
returns its base URL and a closer; `call_latencies(url, path, body_of, callers, calls)` times
`calls` POSTs of JSON split over `callers` concurrent clients (one keep-alive connection each;
`body_of(i)` is call i's body) and returns each call's seconds; `interleaved_latencies` serves
several apps and does so in alternating rounds (what the benches compare); `overhead_rows(name, rows)`
prints p50/p99 per row with the ratio to the first (the baseline) and returns the p50 ratios.
The bare apps below read the body, parse it and answer as the package did before it moved to
Starlette: routing on the path alone, JSON by hand, no middleware.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from functools import partial
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from agentgym_envs.server.base import EnvError
from agentgym_envs.server.table import EpisodeTable
from agentgym_rl.gateway.app import Gateway
from agentgym_rl.gateway.http import server_sent_events, unless_client_gone
from agentgym_rl.processes.ports import free_port

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
_JSON = [(b"content-type", b"application/json")]


async def _body(receive: Receive) -> dict[str, Any]:
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            return json.loads(raw or b"{}")


async def _answer(send: Send, body: Any) -> None:
    payload = json.dumps(body, ensure_ascii=False).encode()
    headers = [*_JSON, (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def bare_gateway(gateway: Gateway) -> ASGIApp:
    """`POST /v1/chat/completions` (whole or streamed) on bare ASGI, through the same
    `Gateway.complete`."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await _body(receive)
        # as the endpoint does: a client gone before its reply cancels the call
        done = await unless_client_gone(gateway.complete(body, str(body["user"])), receive)
        assert done is not None
        if not body.get("stream"):
            await _answer(send, done)
            return
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for event in server_sent_events(done):
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return app


class ChatRequest(BaseModel):
    """The fields the endpoint reads; the rest allowed through."""

    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[dict[str, Any]]
    user: str
    max_tokens: int | None = None
    stream: bool = False


def fastapi_gateway(gateway: Gateway) -> ASGIApp:
    """The same route on FastAPI with a pydantic request model, as a user of FastAPI would
    write it."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: ChatRequest) -> Any:
        from fastapi.responses import StreamingResponse

        done = await gateway.complete(request.model_dump(exclude_none=True), request.user)
        if request.stream:
            return StreamingResponse(
                _each(server_sent_events(done)), media_type="text/event-stream"
            )
        return done

    return app


async def _each(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event


def bare_env_server(table: EpisodeTable) -> ASGIApp:
    """`POST /step` and `/create`, `/reset` on bare ASGI, through the same table ops."""
    from agentgym_envs.server.table import dispatch

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        fields = await _body(receive)
        op = scope["path"].strip("/")
        try:
            body = await table.run(dispatch, table, op, fields)
        except EnvError as err:
            body = {"error": err.message}
        await _answer(send, body)

    return app


async def serve(app: ASGIApp) -> tuple[str, Callable[[], Awaitable[None]]]:
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, port=port, lifespan="off", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    server.capture_signals = _no_signals  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)

    async def close() -> None:
        server.should_exit = True
        await task

    return f"http://127.0.0.1:{port}", close


def _no_signals() -> Any:
    import contextlib

    return contextlib.nullcontext()


async def call_latencies(
    url: str,
    path: str,
    body_of: Callable[[int], dict[str, Any]],
    callers: int,
    calls: int,
    first: int = 0,
) -> list[float]:
    took: list[float] = []
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    clients = [
        httpx.AsyncClient(base_url=url, limits=limits, timeout=60, verify=False)
        for _ in range(callers)
    ]

    async def call(client: httpx.AsyncClient, i: int) -> float:
        start = time.perf_counter()
        response = await client.post(path, json=body_of(i))
        await response.aread()
        assert response.status_code == 200, response.text
        return time.perf_counter() - start

    async def caller(k: int) -> None:
        for i in range(k, calls, callers):
            took.append(await call(clients[k], first + i))

    try:  # each client's connection made before the timed calls (bodies of their own)
        await asyncio.gather(*(call(c, -1 - first - k) for k, c in enumerate(clients)))
        await asyncio.gather(*(caller(k) for k in range(callers)))
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    return took


async def interleaved_latencies(
    apps: dict[str, ASGIApp],
    path: str,
    body_of: Callable[[str, int], dict[str, Any]],
    callers: int,
    calls: int,
    rounds: int = 10,
) -> list[tuple[str, list[float]]]:
    """`call_latencies` of every app, served at once, `calls` each (at least `callers` a round),
    in `rounds` turns whose order rotates: a slow spell of the machine falls on every app alike,
    not on whichever ran then. Rows in `apps`' order (the baseline first); `body_of(name, i)` is
    call i's body."""
    took: dict[str, list[float]] = {name: [] for name in apps}
    names, per_round = list(apps), max(callers, calls // rounds)
    closers: list[Callable[[], Awaitable[None]]] = []
    try:
        urls = {}
        for name, app in apps.items():
            urls[name], close = await serve(app)
            closers.append(close)
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                took[name] += await call_latencies(
                    urls[name], path, partial(body_of, name), callers, per_round, r * per_round
                )
    finally:
        for close in closers:
            await close()
    return list(took.items())


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def overhead_rows(title: str, rows: list[tuple[str, list[float]]]) -> list[float]:
    """Prints p50/p99 (ms) of each row beside the first's; returns each row's p50 ratio."""
    base50 = statistics.median(rows[0][1])
    print(title)
    ratios = []
    for name, took in rows:
        p50, p99 = statistics.median(took), _p(took, 99)
        ratios.append(p50 / base50)
        print(
            f"  {name:<34} p50 {1000 * p50:7.3f} ms  p99 {1000 * p99:7.3f} ms  {p50 / base50:5.2f}x"
        )
    return ratios
