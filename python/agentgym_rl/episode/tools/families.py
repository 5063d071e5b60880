"""Tool calls by template family: read a reply's calls, write a call back, recognise a template's
family (see the package docstring). One module per family: `hermes`, `llama3`, `mistral`."""

from __future__ import annotations

from agentgym_rl.episode.tools import hermes, llama3, mistral
from agentgym_rl.episode.tools.calls import ParsedCalls
from agentgym_rl.episode.tools.schemas import ToolCall, ToolCallError, ToolFamily
from agentgym_rl.trajectory import ChatTokenizer

_FAMILIES = {ToolFamily.HERMES: hermes, ToolFamily.LLAMA3: llama3, ToolFamily.MISTRAL: mistral}


def parse_tool_calls(text: str, family: ToolFamily) -> ParsedCalls:
    """The calls `text` holds in `family`'s layout (see the module docstring)."""
    try:
        return _FAMILIES[family].read(text)
    except ToolCallError as e:
        return ParsedCalls(error=str(e))
    except RecursionError:  # "[[[[..." deeper than Python's JSON decoder recurses
        return ParsedCalls(error="the tool call nests too deeply to read")


def write_call(call: ToolCall, family: ToolFamily) -> str:
    """`call` as a reply of `family` writes it (what its template renders a structured call as)."""
    return _FAMILIES[family].write(call)


def outside_calls(text: str, family: ToolFamily) -> str:
    """The reply's text without its calls (what an API returns as `content`)."""
    return _FAMILIES[family].outside(text)


_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "probe",
        "description": "probe",
        "parameters": {"type": "object", "properties": {}},
    },
}


def detect_family(chat: ChatTokenizer) -> ToolFamily:
    """The family of `chat`'s template, from what it writes for a probe tool; ValueError when
    it writes tools in no layout known here (name the family in the config then)."""
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    try:
        text = chat.render(messages, add_generation_prompt=True, tools=[_PROBE_TOOL])
    except Exception as e:  # a template that raises on tools
        raise ValueError(f"the chat template cannot render tools: {e}") from None
    if '"probe"' not in text:
        raise ValueError("the chat template ignores `tools` (it writes no tool schema)")
    if "<tool_call>" in text:
        return ToolFamily.HERMES
    if "[AVAILABLE_TOOLS]" in text or "[TOOL_CALLS]" in text:
        return ToolFamily.MISTRAL
    if "ipython" in text or '"parameters"' in text:
        return ToolFamily.LLAMA3
    raise ValueError("the chat template writes tools in a layout not known here; set tool_parser")
