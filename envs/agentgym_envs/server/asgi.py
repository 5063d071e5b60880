"""One way the project's HTTP servers are built on Starlette (the env servers, the web sites, the
agent endpoint): `starlette_app(routes, handlers)` is a Starlette app whose routes take a
trailing slash as the same route, answered in place (AgentGym's servers and clients do; a
redirect would cost a round trip and change the URL a browser shows)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def starlette_app(routes: Sequence[BaseRoute], handlers: Mapping[Any, Any]) -> ASGIApp:
    app = Starlette(routes=list(routes), exception_handlers=dict(handlers))
    app.router.redirect_slashes = False

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and len(path) > 1 and path.endswith("/"):
            scope = {**scope, "path": path.rstrip("/") or "/"}
        await app(scope, receive, send)

    return serve
