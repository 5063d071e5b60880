"""The run viewer's web app (a bare ASGI app, as the gateway and env servers are; uvicorn serves it).

Contract:
- `GET /` the page (`page/index.html`: plain HTML, CSS and JS, no build step), `GET /static/<f>`
  its files; `GET /api/overview`, `/api/episodes?<filter>&page=&size=`, `/api/episode/<ref>`,
  `/api/task/<item_id>` answer `RunView`'s JSON.
- With a `token`, every request must carry it: `?token=` (the page's first load: answered with
  an HttpOnly cookie, so the page's own requests carry it), the cookie, or `Authorization:
  Bearer`; otherwise 401 with a page that says how to open it. Without one (loopback), none.
- A bad filter value answers 400, an unknown episode or route 404, each `{"error": message}`;
  any other failure 500 with its message (logged), and the app keeps serving.
- Reads run in a worker thread (a large log's first index must not stall other requests).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import mimetypes
from collections.abc import Awaitable, Callable, MutableMapping
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, unquote

from agentgym_rl.viewer.page_data import RunView

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

log = logging.getLogger(__name__)
COOKIE = "agentgym_view_token"
STATIC = ("index.html", "view.js", "view.css")
UNAUTHORIZED = (
    "<!doctype html><title>agentgym-rl view</title><p>This run viewer is served beyond this "
    "machine and needs the run's token: open the address <code>agentgym-rl view</code> printed "
    "(it ends in <code>?token=...</code>).</p>"
)


class NotFound(LookupError):
    pass


class ViewerApp:
    """See the module docstring."""

    def __init__(self, view: RunView, token: str | None = None) -> None:
        self.view = view
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode()))
        path = scope["path"]
        if not self._allowed(scope, query):
            await _send(send, 401, UNAUTHORIZED.encode(), "text/html; charset=utf-8")
            return
        cookie = []
        if self.token and query.get("token"):
            cookie = [
                (
                    b"set-cookie",
                    f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/".encode(),
                )
            ]
        try:
            if path.startswith("/api/"):
                body = await asyncio.to_thread(self._api, path[len("/api/") :], query)
                await _send(send, 200, json.dumps(body).encode(), "application/json", cookie)
            else:
                name = "index.html" if path in ("/", "/index.html") else path.rsplit("/", 1)[-1]
                if name not in STATIC or not (path == "/" or path.endswith(name)):
                    raise NotFound(f"no page {path}")
                data = resources.files("agentgym_rl.viewer").joinpath("page", name).read_bytes()
                kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
                await _send(send, 200, data, kind + "; charset=utf-8", cookie)
        except NotFound as e:
            await _error(send, 404, str(e))
        except ValueError as e:
            await _error(send, 400, str(e))
        except Exception as e:
            log.exception("viewer: %s failed", path)
            await _error(send, 500, f"{type(e).__name__}: {e}")

    def _allowed(self, scope: Scope, query: dict[str, str]) -> bool:
        if self.token is None:
            return True
        headers = dict(scope.get("headers") or [])
        offered = [query.get("token", "")]
        auth = headers.get(b"authorization", b"").decode(errors="replace")
        if auth.startswith("Bearer "):
            offered.append(auth[len("Bearer ") :])
        for part in headers.get(b"cookie", b"").decode(errors="replace").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE:
                offered.append(value)
        return any(hmac.compare_digest(o.encode(), self.token.encode()) for o in offered if o)

    def _api(self, route: str, query: dict[str, str]) -> dict[str, Any]:
        view = self.view
        view.refresh_logs()
        kind, _, arg = route.partition("/")
        arg = unquote(arg)
        if kind == "overview" and not arg:
            return view.overview()
        if kind == "episodes" and not arg:
            return view.episodes(query)
        if kind == "episode" and arg:
            try:
                return view.episode(arg)
            except (KeyError, ValueError):
                raise NotFound(
                    f"no episode {arg!r} in the index (refs are <file>.<line>)"
                ) from None
        if kind == "task" and arg:
            return view.task(arg)
        raise NotFound(f"no route /api/{route}")


async def _send(
    send: Send, status: int, body: bytes, kind: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", kind.encode()), (b"cache-control", b"no-store"), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Send, status: int, message: str) -> None:
    await _send(send, status, json.dumps({"error": message}).encode(), "application/json")


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
