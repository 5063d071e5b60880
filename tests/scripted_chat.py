"""A scripted OpenAI-compatible chat endpoint (ASGI), for driving `agentgym-rl eval --api-base`
without a model: `GET /v1/models` lists `scripted`, and every `POST /v1/chat/completions`
answers `Thought: ...` and `Action: $SCRIPTED_ACTION` (default `go to red ball 1`), after
`$SCRIPTED_DELAY_S` seconds (default 0: a model's thinking time, to make an evaluation last)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

MODEL = "scripted"
ACTION = os.environ.get("SCRIPTED_ACTION", "go to red ball 1")
DELAY_S = float(os.environ.get("SCRIPTED_DELAY_S", "0"))


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    while True:  # drain the request body
        message = await receive()
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            break
    route = (scope["method"], scope["path"])
    if route == ("GET", "/v1/models"):
        status, body = 200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
    elif route == ("POST", "/v1/chat/completions"):
        await asyncio.sleep(DELAY_S)
        text = f"Thought: the goal is close.\nAction: {ACTION}"
        choice = {"index": 0, "message": {"role": "assistant", "content": text}}
        status, body = 200, {"object": "chat.completion", "model": MODEL, "choices": [choice]}
    else:
        status, body = 404, {"detail": "Not Found"}
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
