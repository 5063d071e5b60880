"""Tool mode for the text policies: an API's structured `tool_calls` read by the same turn rule
training uses (an env's tools without a chat: `episode.tools.tool_reader(env, None)`).

Contract:
- `ApiToolReader` is a `ToolReader` for calls an API returns structured: its hint names the
  tools instead of showing a text layout the API model should not imitate.
- `read_api_calls(reader, tool_calls, turn)` reads a chat completion's `message.tool_calls`
  (`{id, type: "function", function: {name, arguments: JSON string}}`) with
  `ToolReader.read_calls` (ids, `calls_per_turn`, schema checks); a call whose arguments are not
  JSON, or that has no function name, is an invalid call whose feedback names the problem.
- `assistant_message(message, reading)` is the assistant message as the API sent it (content
  plus `tool_calls`), each call carrying the id its `tool` message answers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from agentgym_rl.episode.tools import ToolCall, ToolReader, ToolReading


class ApiToolReader(ToolReader):
    """A `ToolReader` whose hint suits a model that calls tools through an API's `tools`."""

    def hint(self) -> str:
        return (
            "Call one of the tools you are given (a function call, not text); the tools are: "
            f"{self.tools.describe()}."
        )


def as_api_reader(reader: ToolReader) -> ToolReader:
    """`reader` with the hint of `ApiToolReader` (the tools, family and limit unchanged)."""
    if isinstance(reader, ApiToolReader):
        return reader
    return ApiToolReader(reader.tools, reader.family, reader.calls_per_turn)


def _api_call(item: Any) -> tuple[ToolCall, str | None]:
    """One entry of `tool_calls` as a `ToolCall`, and what is malformed about it (None: ok)."""
    raw = item if isinstance(item, Mapping) else {}
    call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else None
    function = raw.get("function")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        return ToolCall("", None, call_id), 'a tool call needs a "function" with a string "name"'
    name, args = function["name"], function.get("arguments")
    if isinstance(args, str):
        if not args.strip():
            return ToolCall(name, {}, call_id), None  # some servers send "" for no arguments
        try:
            return ToolCall(name, json.loads(args), call_id), None
        except json.JSONDecodeError as e:
            shown = args if len(args) <= 120 else args[:120] + "..."
            problem = (
                f"the arguments of {name!r} are not valid JSON ({e.msg} at char {e.pos}): {shown}"
            )
            return ToolCall(name, None, call_id), problem
    return ToolCall(name, args, call_id), None


def read_api_calls(reader: ToolReader, tool_calls: Sequence[Any], turn: int) -> ToolReading:
    """An API reply's structured calls read by the turn rule; see the module docstring."""
    parsed = [_api_call(item) for item in tool_calls]
    reading = reader.read_calls([call for call, _ in parsed], turn)
    steps = list(reading.steps)
    for i, (call, problem) in enumerate(parsed):
        if problem is None or i >= len(steps) or steps[i].refused:
            continue
        if call.name and call.name not in reader.tools.names:
            continue  # "unknown tool ..." says more than what is wrong with its arguments
        steps[i] = replace(steps[i], action=None, feedback=f"Invalid tool call: {problem}.")
    return ToolReading(tuple(steps), reading.feedback)


def assistant_message(message: Mapping[str, Any], reading: ToolReading) -> dict[str, Any]:
    """The assistant message to send back: content and `tool_calls` as the API wrote them, each
    call with the id its answer carries (one the API left out is filled in)."""
    calls = message.get("tool_calls") or []
    content = message.get("content")
    out: dict[str, Any] = {"role": "assistant", "content": content if calls else content or ""}
    if calls:
        written = []
        for item, step in zip(calls, reading.steps, strict=False):
            call = dict(item) if isinstance(item, Mapping) else {"function": {"name": ""}}
            call["id"] = step.id
            call.setdefault("type", "function")
            written.append(call)
        out["tool_calls"] = written
    return out


__all__ = [
    "ApiToolReader",
    "as_api_reader",
    "assistant_message",
    "read_api_calls",
]
