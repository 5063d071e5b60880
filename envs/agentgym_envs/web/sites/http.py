"""The bits of HTTP the sites need, on bare ASGI: a parsed request, HTML and redirect
responses, and the page layout every site page shares.

Contract: handlers are plain functions `(Request) -> Response`; a site's `__call__` parses the
request (query, form body up to 64 KiB, cookies), routes by path and sends the response. The
session cookie `agentgym_session` names the per-session state; a request without one gets a
fresh session and the cookie is set on its response. Pages are server-rendered, accessible HTML
(landmarks, headings, labelled inputs, real buttons), no JavaScript.
"""

from __future__ import annotations

import html
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, quote

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

COOKIE = "agentgym_session"
MAX_BODY = 64 * 1024


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def q(text: str) -> str:
    """A path segment or query value, URL-quoted."""
    return quote(text, safe="")


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str]
    session: str
    new_session: bool = False


@dataclass(slots=True)
class Response:
    status: int = 200
    body: str = ""
    location: str | None = None
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


def redirect(location: str) -> Response:
    return Response(303, "", location)


def not_found(title: str = "Page not found") -> Response:
    return Response(404, page(title, f"<h1>{esc(title)}</h1><p><a href='/'>Home</a></p>"))


def _pairs(raw: bytes) -> dict[str, str]:
    parsed = parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items()}


async def read_request(scope: Scope, receive: Receive) -> Request:
    body = b""
    if scope["method"] == "POST":
        more = True
        while more and len(body) <= MAX_BODY:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
    cookies: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed cookie header is treated as none
                continue
            cookies.update({k: m.value for k, m in jar.items()})
    session = cookies.get(COOKIE, "")
    new = not session
    if new:
        session = secrets.token_hex(8)
    return Request(
        method=scope["method"],
        path=scope["path"].rstrip("/") or "/",
        query=_pairs(scope.get("query_string", b"")),
        form=_pairs(body[:MAX_BODY]),
        session=session,
        new_session=new,
    )


async def send_response(send: Send, request: Request, response: Response) -> None:
    headers = [(b"content-type", b"text/html; charset=utf-8"), *response.headers]
    if response.location is not None:
        headers.append((b"location", response.location.encode()))
    if request.new_session:
        cookie = f"{COOKIE}={request.session}; Path=/; SameSite=Lax"
        headers.append((b"set-cookie", cookie.encode()))
    body = response.body.encode()
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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
