"""The bits of HTTP the sites share, on Starlette: the visit a page reads (path parameters,
query, form body up to 64 KiB, session), HTML and redirect responses, a site's app from its
routes, and the page layout every site page shares.

Contract: `site_app(routes)` serves each `(path, page, methods)` route (Starlette's path syntax);
a page is a plain function `(Visit) -> Response`; a trailing slash is the same route; an unknown
route or method answers the not-found page. The session cookie `agentgym_session` names the
per-session state; a visit without one gets a fresh session and the cookie is set on its
response. Pages are server-rendered, accessible HTML (landmarks, headings, labelled inputs, real
buttons), no JavaScript.
"""

from __future__ import annotations

import html
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from agentgym_envs.server.asgi import starlette_app

COOKIE = "agentgym_session"
MAX_BODY = 64 * 1024
ANY = ("GET", "POST")
POST = ("POST",)


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def q(text: str) -> str:
    """A path segment or query value, URL-quoted."""
    return quote(text, safe="")


@dataclass(slots=True)
class Visit:
    """What a page reads of its request."""

    method: str
    params: dict[str, str]
    query: dict[str, str]
    form: dict[str, str]
    session: str
    new_session: bool = False


Page = Callable[[Visit], Response]


def html_page(body: str, status: int = 200) -> Response:
    return HTMLResponse(body, status_code=status)


def redirect(location: str) -> Response:
    return RedirectResponse(location, status_code=303)


def not_found(title: str = "Page not found") -> Response:
    return html_page(page(title, f"<h1>{esc(title)}</h1><p><a href='/'>Home</a></p>"), 404)


def _pairs(raw: str) -> dict[str, str]:
    parsed = parse_qs(raw, keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items()}


async def read_visit(request: Request) -> Visit:
    body = b""
    if request.method == "POST":
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                break
    session = request.cookies.get(COOKIE, "")
    new = not session
    return Visit(
        method=request.method,
        params=dict(request.path_params),
        query=_pairs(request.url.query),
        form=_pairs(body[:MAX_BODY].decode("utf-8", "replace")),
        session=session or secrets.token_hex(8),
        new_session=new,
    )


def site_app(routes: Sequence[tuple[str, Page, Sequence[str]]]) -> Callable[..., Awaitable[None]]:
    """The ASGI app of a site's routes (see the module docstring)."""

    def endpoint(show: Page) -> Callable[[Request], Awaitable[Response]]:
        async def answer(request: Request) -> Response:
            visit = await read_visit(request)
            response = show(visit)
            if visit.new_session:
                response.set_cookie(COOKIE, visit.session, path="/", samesite="lax")
            return response

        return answer

    async def unknown(request: Request, exc: Exception) -> Response:
        return not_found()

    routes_ = [Route(path, endpoint(show), methods=list(m)) for path, show, m in routes]
    return starlette_app(routes_, {HTTPException: unknown})


STYLE = (
    "body{font-family:sans-serif;margin:0 auto;max-width:60rem;padding:0 1rem}"
    "nav a{margin-right:1rem}table{border-collapse:collapse}td,th{padding:.2rem .6rem;"
    "border-bottom:1px solid #ddd;text-align:left}.review,.reply{border-top:1px solid #eee}"
)


def page(title: str, main: str, site: str = "", nav: str = "", notice: str = "") -> str:
    """A full HTML document: banner with the site name and navigation, then `main`."""
    notice_html = f"<p role='status'>{esc(notice)}</p>" if notice else ""
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{esc(title)}{' - ' + esc(site) if site else ''}</title>"
        f"<style>{STYLE}</style></head><body>"
        f"<header><p><a href='/'>{esc(site or 'Home')}</a></p>"
        f"<nav aria-label='Main'>{nav}</nav></header>"
        f"<main>{notice_html}{main}</main></body></html>"
    )


def search_form(value: str = "", label: str = "Search") -> str:
    return (
        "<form role='search' method='get' action='/search'>"
        f"<label for='search-q'>{esc(label)}</label> "
        f"<input id='search-q' name='q' type='search' value='{esc(value)}'> "
        "<button type='submit'>Search</button></form>"
    )
