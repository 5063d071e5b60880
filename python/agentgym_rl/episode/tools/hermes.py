"""Hermes/Qwen tool calls: `<tool_call>{"name", "arguments"}</tool_call>` blocks."""

from __future__ import annotations

import json
import re

from agentgym_rl.episode.tools.calls import ParsedCalls, call_of, loads
from agentgym_rl.episode.tools.schemas import ToolCall

_HERMES = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


def read(text: str) -> ParsedCalls:
    blocks = _HERMES.findall(text)
    if not blocks:
        return ParsedCalls(found=False)
    return ParsedCalls([call_of(loads(b.strip())) for b in blocks])


def write(call: ToolCall) -> str:
    args = json.dumps(call.arguments, ensure_ascii=False)
    return f'<tool_call>\n{{"name": {json.dumps(call.name)}, "arguments": {args}}}\n</tool_call>'


def outside(text: str) -> str:
    return text.split("<tool_call>", 1)[0].strip()
