"""The run viewer's web app (an ASGI app on Starlette, as the gateway and env servers are;
uvicorn serves it).

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
import logging
import mimetypes
from collections.abc import Awaitable, Callable, MutableMapping
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

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
_NO_STORE = {"cache-control": "no-store"}


class NotFound(LookupError):
    pass


class ViewerApp:
    """See the module docstring."""

    def __init__(self, view: RunView, token: str | None = None) -> None:
        self.view = view
        self.token = token
        api = self._api
        routes = [
            Route("/", self._page, methods=["GET"]),
            Route("/index.html", self._page, methods=["GET"]),
            Route("/static/{name}", self._page, methods=["GET"]),
            Route("/api/overview", api(lambda request: view.overview())),
            Route("/api/episodes", api(lambda request: view.episodes(dict(request.query_params)))),
            Route("/api/episode/{ref:path}", api(lambda request: self._episode(request))),
            Route(
                "/api/task/{item:path}", api(lambda request: view.task(request.path_params["item"]))
            ),
        ]
        handlers = {NotFound: _error(404), ValueError: _error(400), HTTPException: _no_route}
        self.app = Starlette(routes=routes, exception_handlers=handlers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: Starlette's
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if not self._allowed(request):
            await HTMLResponse(UNAUTHORIZED, status_code=401, headers=_NO_STORE)(
                scope, receive, send
            )
            return
        cookie = b""
        if self.token and request.query_params.get("token"):
            cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/".encode()

        async def sending(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"cache-control", b"no-store")]
                headers += [(b"set-cookie", cookie)] if cookie else []
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)

    def _allowed(self, request: Request) -> bool:
        if self.token is None:
            return True
        offered = [request.query_params.get("token", ""), request.cookies.get(COOKIE, "")]
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            offered.append(auth[len("Bearer ") :])
        return any(hmac.compare_digest(o.encode(), self.token.encode()) for o in offered if o)

    async def _page(self, request: Request) -> Response:
        name = request.path_params.get("name", "index.html")
        if name not in STATIC:
            raise NotFound(f"no page {request.url.path}")
        data = resources.files("agentgym_rl.viewer").joinpath("page", name).read_bytes()
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(data, media_type=kind + "; charset=utf-8")

    def _api(
        self, read: Callable[[Request], dict[str, Any]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """An API route: `read` in a worker thread on fresh logs, its failure a 500 that says
        what failed (logged) unless it is a 400 or 404."""

        def fresh(request: Request) -> dict[str, Any]:
            self.view.refresh_logs()
            return read(request)

        async def answer(request: Request) -> Response:
            try:
                return JSONResponse(await asyncio.to_thread(fresh, request))
            except (NotFound, ValueError):
                raise
            except Exception as e:
                log.exception("viewer: %s failed", request.url.path)
                return JSONResponse({"error": f"{type(e).__name__}: {e}"}, status_code=500)

        return answer

    def _episode(self, request: Request) -> dict[str, Any]:
        ref = request.path_params["ref"]
        try:
            return self.view.episode(ref)
        except (KeyError, ValueError):
            raise NotFound(f"no episode {ref!r} in the index (refs are <file>.<line>)") from None


def _error(status: int) -> Callable[[Request, Exception], Awaitable[Response]]:
    async def answer(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=status)

    return answer


async def _no_route(request: Request, exc: Exception) -> Response:
    """Starlette's 404 and 405: no route answers this method and path."""
    return JSONResponse({"error": f"no route {request.url.path}"}, status_code=404)
