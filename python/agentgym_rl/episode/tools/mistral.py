"""Mistral tool calls: `[TOOL_CALLS]` then a JSON list, or `name[ARGS]{...}` runs."""

from __future__ import annotations

import json
import re

from agentgym_rl.episode.tools.calls import ParsedCalls, call_of
from agentgym_rl.episode.tools.schemas import ToolCall, ToolCallError

_MISTRAL_ARGS = re.compile(r"([A-Za-z0-9_.-]+)\[ARGS\]")


def read(text: str) -> ParsedCalls:
    if "[TOOL_CALLS]" not in text:
        return ParsedCalls(found=False)
    body = text.split("[TOOL_CALLS]", 1)[1].strip()
    if _MISTRAL_ARGS.match(body):  # `name[ARGS]{...}` runs (newer tokenizers)
        calls, decoder = [], json.JSONDecoder()
        for part in body.split("[TOOL_CALLS]"):
            m = _MISTRAL_ARGS.match(part.strip())
            if m is None:
                raise ToolCallError("expected name[ARGS]{...} after [TOOL_CALLS]")
            rest = part.strip()[m.end() :]
            try:
                args, _ = decoder.raw_decode(rest)
            except json.JSONDecodeError as e:
                raise ToolCallError(
                    f"the tool call is not valid JSON ({e.msg} at char {e.pos})"
                ) from None
            calls.append(ToolCall(m.group(1), args))
        return ParsedCalls(calls)
    try:
        found, _ = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as e:
        raise ToolCallError(f"the tool call is not valid JSON ({e.msg} at char {e.pos})") from None
    items = found if isinstance(found, list) else [found]
    return ParsedCalls([call_of(item) for item in items])


def write(call: ToolCall) -> str:
    args = json.dumps(call.arguments, ensure_ascii=False)
    return f'[TOOL_CALLS][{{"name": {json.dumps(call.name)}, "arguments": {args}}}]'


def outside(text: str) -> str:
    return text.split("[TOOL_CALLS]", 1)[0].strip()
