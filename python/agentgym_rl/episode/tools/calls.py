"""What every family's reader shares: the calls of one reply (`ParsedCalls`) and how one JSON
call object becomes a `ToolCall`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentgym_rl.episode.tools.schemas import ToolCall, ToolCallError


@dataclass(frozen=True, slots=True)
class ParsedCalls:
    """The calls of one reply, or why none could be read (`error`); `found` is False when the
    reply did not try to call anything."""

    calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None
    found: bool = True


def call_of(obj: Any, args_key: str = "arguments") -> ToolCall:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise ToolCallError('a tool call must be a JSON object with a string "name"')
    args = obj.get(args_key, obj.get("arguments", obj.get("parameters")))
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            raise ToolCallError(f'the "arguments" of {obj["name"]!r} are not valid JSON') from None
    call_id = obj.get("id")
    return ToolCall(obj["name"], args, call_id if isinstance(call_id, str) else None)


def loads(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ToolCallError(f"the tool call is not valid JSON ({e.msg} at char {e.pos})") from None
