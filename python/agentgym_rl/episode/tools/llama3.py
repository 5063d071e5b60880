"""Llama 3.1 tool calls: JSON objects `{"name", "parameters"}`, after an optional
`<|python_tag|>`, several split by `;`."""

from __future__ import annotations

import json

from agentgym_rl.episode.tools.calls import ParsedCalls, call_of
from agentgym_rl.episode.tools.schemas import ToolCall, ToolCallError


def read(text: str) -> ParsedCalls:
    body = text.split("<|python_tag|>", 1)[-1].strip()
    if not body.startswith("{"):
        return ParsedCalls(found=False)
    decoder, calls, pos = json.JSONDecoder(), [], 0
    while pos < len(body):
        try:
            obj, end = decoder.raw_decode(body, pos)
        except json.JSONDecodeError as e:
            raise ToolCallError(
                f"the tool call is not valid JSON ({e.msg} at char {e.pos})"
            ) from None
        calls.append(call_of(obj, "parameters"))
        pos = end
        while pos < len(body) and body[pos] in " \t\r\n;":
            pos += 1
    return ParsedCalls(calls)


def write(call: ToolCall) -> str:
    args = json.dumps(call.arguments, ensure_ascii=False)
    return f'{{"name": {json.dumps(call.name)}, "parameters": {args}}}'


def outside(text: str) -> str:
    """Nothing: a Llama 3.1 reply that calls is the calls alone."""
    return ""
