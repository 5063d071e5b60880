"""A scripted OpenAI-compatible chat endpoint (ASGI), for driving `agentgym-rl eval --api-base`
without a model: `GET /v1/models` lists `scripted`, and every `POST /v1/chat/completions`
answers `Thought: ...` and `Action: $SCRIPTED_ACTION` (default `go to red ball 1`), after
`$SCRIPTED_DELAY_S` seconds (default 0: a model's thinking time, to make an evaluation last).

Tool mode, as the OpenAI API behaves: a request that carries `tools` is answered with
`tool_calls` (`content: null`, `finish_reason: "tool_calls"`, a fresh id per call): the call
`$SCRIPTED_TOOL_CALL` holds as JSON `{"name": ..., "arguments": {...}}` (a list: several calls in
one reply; `arguments` given as a string is sent as written, e.g. not JSON; `null`: a text reply
with no call), by default `act` with `{"action": $SCRIPTED_ACTION}`. Every request's messages are
checked the way the API checks them, and a conversation it would refuse gets HTTP 400 with an
`error.message`: a `role: tool` message that answers no `tool_calls` id of the assistant message
before it, an assistant's `tool_calls` not all answered before the next message of another role
(or the end), a malformed tool call or tool schema. `GET /scripted/stats` counts the requests,
those with `tools`, and the refused ones with their messages; `RECEIVED` keeps every request
body (for a test serving the app in its own process).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

MODEL = "scripted"

RECEIVED: list[dict[str, Any]] = []
"""Every chat request body, in arrival order."""
STATS: dict[str, Any] = {"requests": 0, "with_tools": 0, "rejected": 0, "errors": []}
_IDS = itertools.count()


def action() -> str:
    return os.environ.get("SCRIPTED_ACTION", "go to red ball 1")


def tool_calls() -> list[dict[str, Any]] | None:
    """The calls of the scripted reply in tool mode (None: reply in text, calling nothing)."""
    given = os.environ.get("SCRIPTED_TOOL_CALL")
    script = json.loads(given) if given else {"name": "act", "arguments": {"action": action()}}
    if script is None:
        return None
    calls = []
    for call in script if isinstance(script, list) else [script]:
        args = call.get("arguments", {})
        calls.append(
            {
                "id": f"call_{next(_IDS):06x}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    return calls


def conversation_error(body: dict[str, Any]) -> str | None:
    """Why the OpenAI API would refuse this request's tools or messages (None: it would not)."""
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            return "Invalid value for 'tools': each tool must be {type: 'function', function}."
        if not isinstance(function.get("name"), str):
            return "Missing required parameter: 'tools[].function.name'."
    pending: list[str] = []  # tool_call ids of the last assistant message not yet answered
    for i, message in enumerate(body.get("messages") or []):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return (
                    f"Invalid parameter: messages[{i}] with role 'tool' must be a response to a "
                    f"preceding message with 'tool_calls' (no unanswered call id {call_id!r})."
                )
            pending.remove(call_id)
            if not isinstance(message.get("content"), str):
                return f"Invalid type for 'messages[{i}].content': expected a string."
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)} (before messages[{i}])"
            )
        if role == "assistant" and message.get("tool_calls"):
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                if not isinstance(call.get("id"), str) or call.get("type") != "function":
                    return f"Invalid 'messages[{i}].tool_calls': each needs an id and type."
                if not isinstance(function.get("name"), str):
                    return f"Invalid 'messages[{i}].tool_calls[].function.name'."
                if not isinstance(function.get("arguments"), str):
                    return f"Invalid 'messages[{i}].tool_calls[].function.arguments': a string."
                pending.append(call["id"])
        elif role in ("system", "user", "assistant"):
            if not isinstance(message.get("content"), str):
                return f"Invalid type for 'messages[{i}].content': expected a string."
        else:
            return f"Invalid value for 'messages[{i}].role': {role!r}."
    if pending:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            f"to each 'tool_call_id'. The following tool_call_ids did not have response "
            f"messages: {', '.join(pending)}"
        )
    return None


def completion(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    STATS["requests"] += 1
    RECEIVED.append(body)
    if body.get("tools"):
        STATS["with_tools"] += 1
    error = conversation_error(body)
    if error is not None:
        STATS["rejected"] += 1
        STATS["errors"].append(error)
        return 400, {"error": {"message": error, "type": "invalid_request_error"}}
    calls = tool_calls() if body.get("tools") else None
    if calls is None:
        text = f"Thought: the goal is close.\nAction: {action()}"
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = "stop"
    else:
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return 200, {"object": "chat.completion", "model": MODEL, "choices": [choice]}


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    raw = b""
    while True:  # read the request body
        message = await receive()
        raw += message.get("body", b"")
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            break
    route = (scope["method"], scope["path"])
    body: dict[str, Any]
    if route == ("GET", "/v1/models"):
        status, body = 200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
    elif route == ("GET", "/scripted/stats"):
        status, body = 200, STATS
    elif route == ("POST", "/v1/chat/completions"):
        await asyncio.sleep(float(os.environ.get("SCRIPTED_DELAY_S", "0")))
        try:
            request = json.loads(raw)
        except json.JSONDecodeError:
            status, body = 400, {"error": {"message": "We could not parse the JSON body."}}
        else:
            status, body = completion(request)
    else:
        status, body = 404, {"detail": "Not Found"}
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
