"""Native tool calls: an env's tools, the calls a reply holds, and the text action each stands for.

Modules: `schemas` (`ToolSet`), `calls` (what the readers share), one reader per template
family (`hermes`, `llama3`, `mistral`), `families` (dispatch, `write_call`, `detect_family`),
`reader` (the turn rule's `ToolReader`).

Contract:
- `ToolSet.from_wire(rows)` holds an env's tools as its server serves them (`GET /tools`: each
  an OpenAI function schema, the text action it stands for as a template of its arguments, and
  the defaults of optional ones). `action_for(call)` checks a call against its schema (known
  tool, required arguments present, no unknown ones, JSON types and enums) and writes the text
  action the env steps with, or raises `ToolCallError` naming the problem; `call_for(action)` is
  the inverse (which call writes a given text action: `init-model`'s transcripts).
- `parse_tool_calls(text, family)` reads the calls out of one reply as the template family writes
  them: Hermes/Qwen `<tool_call>{"name", "arguments"}</tool_call>` blocks, Llama 3.1 JSON objects
  (`{"name", "parameters"}`, after an optional `<|python_tag|>`, several split by `;`), Mistral
  `[TOOL_CALLS]` then a JSON list (or `name[ARGS]{...}` runs). `write_call` is the reverse, in the
  layout the family's template renders a structured call; `outside_calls` the reply's text
  without its calls.
- `detect_family(chat)` renders a probe with `tools=` through the model's own template and
  recognises the family from what it writes; a config may name the family instead.
- `ToolReader` is the turn rule's view of one env's tools (`tool_reader(env, chat, parser)`
  builds it): `read(text, turn)` gives each call's id and action, or why it is not stepped
  (malformed, or beyond `calls_per_turn`), or, when the reply called nothing, the feedback that
  goes back as a user message; `turn.act_on_calls` steps the env and answers every call with a
  `tool` message carrying its id.
"""

from agentgym_rl.episode.tools.calls import ParsedCalls
from agentgym_rl.episode.tools.families import (
    detect_family,
    outside_calls,
    parse_tool_calls,
    write_call,
)
from agentgym_rl.episode.tools.reader import (
    ToolReader,
    ToolReading,
    ToolStep,
    tool_message,
    tool_reader,
)
from agentgym_rl.episode.tools.schemas import ToolCall, ToolCallError, ToolFamily, ToolSet

__all__ = [
    "ParsedCalls",
    "ToolCall",
    "ToolCallError",
    "ToolFamily",
    "ToolReader",
    "ToolReading",
    "ToolSet",
    "ToolStep",
    "detect_family",
    "outside_calls",
    "parse_tool_calls",
    "tool_message",
    "tool_reader",
    "write_call",
]
