"""Native tool calls: an env's tools, the calls a reply holds, and the text action each stands for.

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
  layout the family's template renders a structured call.
- `detect_family(chat)` renders a probe with `tools=` through the model's own template and
  recognises the family from what it writes; a config may name the family instead.
- `ToolReader` is the turn rule's view of one env's tools (`tool_reader(env, chat, parser)`
  builds it): `read(text, turn)` gives each call's id and action, or why it is not stepped
  (malformed, or beyond `calls_per_turn`), or, when the reply called nothing, the feedback that
  goes back as a user message; `turn.act_on_calls` steps the env and answers every call with a
  `tool` message carrying its id.
"""

from __future__ import annotations

import enum
import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym_rl.env_discovery import env_traits
from agentgym_rl.trajectory import ChatTokenizer


class ToolFamily(str, enum.Enum):
    """How a template family writes a tool call in the reply text."""

    HERMES = "hermes"
    """Qwen2.5/Qwen3, Hermes: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`."""
    LLAMA3 = "llama3"
    """Llama 3.1+: a bare JSON `{"name": ..., "parameters": {...}}` (after `<|python_tag|>`)."""
    MISTRAL = "mistral"
    """Mistral: `[TOOL_CALLS][{"name": ..., "arguments": {...}}]`."""


class ToolCallError(ValueError):
    """A call the env cannot be stepped with; the message is the model's feedback."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call as the reply wrote it (`arguments` unchecked: whatever JSON it held)."""

    name: str
    arguments: Any
    id: str | None = None


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


@dataclass(frozen=True, slots=True)
class _Tool:
    schema: dict[str, Any]
    action: str
    defaults: dict[str, Any]
    pattern: re.Pattern[str]

    @property
    def name(self) -> str:
        return str(self.schema["function"]["name"])

    @property
    def properties(self) -> dict[str, Any]:
        return _properties(self.schema)

    @property
    def required(self) -> list[str]:
        return list(self.schema["function"].get("parameters", {}).get("required", []))


_TYPED_TEXT = {"boolean": "[01]", "integer": r"-?\d+", "number": r"-?\d+(?:\.\d+)?"}


def _pattern(template: str, properties: Mapping[str, Any]) -> re.Pattern[str]:
    """What a template writes, each argument captured as the text its type allows."""
    parts = []
    for literal, name, _, _ in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name:
            kind = properties.get(name, {}).get("type", "string")
            parts.append(f"(?P<{name}>{_TYPED_TEXT.get(kind, '.*?')})")
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _typed(text: str, spec: Mapping[str, Any]) -> Any:
    """A template's text of an argument back as the argument's JSON type (None: it is not)."""
    kind = spec.get("type", "string")
    if kind == "boolean":
        return {"1": True, "0": False}.get(text)
    if kind == "integer":
        return int(text) if re.fullmatch(r"-?\d+", text) else None
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            return None
    return text


def _properties(schema: Mapping[str, Any]) -> dict[str, Any]:
    return dict(schema["function"].get("parameters", {}).get("properties", {}))


@dataclass(frozen=True)
class ToolSet:
    """An env's tools; see the module docstring."""

    tools: tuple[_Tool, ...]

    @classmethod
    def from_wire(cls, rows: Sequence[Mapping[str, Any]]) -> ToolSet:
        tools = tuple(
            _Tool(
                dict(r["schema"]),
                str(r["action"]),
                dict(r.get("defaults") or {}),
                _pattern(str(r["action"]), _properties(r["schema"])),
            )
            for r in rows
        )
        if not tools:
            raise ValueError("a tool set needs at least one tool")
        return cls(tools)

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """What a chat template's (or an API's) `tools=` receives."""
        return [t.schema for t in self.tools]

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def describe(self) -> str:
        """The tools as feedback names them: `click(element_id), stop(answer?)`."""
        out = []
        for t in self.tools:
            args = ", ".join(p if p in t.required else f"{p}?" for p in t.properties)
            out.append(f"{t.name}({args})")
        return ", ".join(out)

    def example(self) -> ToolCall:
        """A call of the first tool with placeholder values (what feedback shows)."""
        tool = self.tools[0]
        placeholder = {"string": "...", "integer": 1, "number": 1.0, "boolean": True}
        args = {
            name: (spec.get("enum") or [placeholder.get(spec.get("type", "string"), "...")])[0]
            for name, spec in tool.properties.items()
            if name in tool.required
        }
        return ToolCall(tool.name, args)

    def _tool(self, name: str) -> _Tool:
        for t in self.tools:
            if t.name == name:
                return t
        raise ToolCallError(f"unknown tool {name!r}; the tools are: {self.describe()}")

    def action_for(self, call: ToolCall) -> str:
        """The text action `call` stands for; `ToolCallError` says what is wrong with it."""
        tool = self._tool(call.name)
        args = call.arguments
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ToolCallError(f"the arguments of {call.name!r} must be a JSON object")
        props = tool.properties
        unknown = sorted(set(args) - set(props))
        if unknown:
            raise ToolCallError(
                f"{call.name!r} has no argument {unknown[0]!r}; it takes {self._signature(tool)}"
            )
        values = dict(tool.defaults)
        for name, spec in props.items():
            if name not in args:
                if name in tool.required:
                    raise ToolCallError(
                        f"{call.name!r} is missing argument {name!r}; it takes {self._signature(tool)}"
                    )
                continue
            values[name] = _checked(call.name, name, args[name], spec)
        return tool.action.format(**{k: _text(v) for k, v in values.items()})

    def call_for(self, action: str) -> ToolCall | None:
        """The call that writes `action` (specific tools first, a catch-all template last)."""
        for tool in sorted(self.tools, key=lambda t: t.action.strip().startswith("{")):
            match = tool.pattern.match(action)
            if match is None:
                continue
            props = tool.properties
            args = {}
            for name, text in match.groupdict().items():
                value = _typed(text, props.get(name, {}))
                if value is None:
                    break
                if (
                    name in tool.defaults
                    and value == tool.defaults[name]
                    and name not in tool.required
                ):
                    continue
                args[name] = value
            else:
                call = ToolCall(tool.name, args)
                try:
                    if self.action_for(call) == action:
                        return call
                except ToolCallError:
                    pass
        return None

    @staticmethod
    def _signature(tool: _Tool) -> str:
        args = ", ".join(
            f"{n}: {s.get('type', 'string')}" + ("" if n in tool.required else " (optional)")
            for n, s in tool.properties.items()
        )
        return f"{tool.name}({args})"


def _checked(tool: str, name: str, value: Any, spec: Mapping[str, Any]) -> Any:
    kind = spec.get("type", "string")
    ok = isinstance(value, _JSON_TYPES.get(kind, (object,)))
    if kind in ("integer", "number") and isinstance(value, bool):
        ok = False
    if not ok:
        raise ToolCallError(f"{tool!r} argument {name!r} must be {kind}, not {json.dumps(value)}")
    choices = spec.get("enum")
    if choices and value not in choices:
        raise ToolCallError(f"{tool!r} argument {name!r} must be one of {json.dumps(choices)}")
    return value


# --- reading calls out of a reply ---


@dataclass(frozen=True, slots=True)
class ParsedCalls:
    """The calls of one reply, or why none could be read (`error`); `found` is False when the
    reply did not try to call anything."""

    calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None
    found: bool = True


_HERMES = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_MISTRAL_ARGS = re.compile(r"([A-Za-z0-9_.-]+)\[ARGS\]")


def _call_of(obj: Any, args_key: str = "arguments") -> ToolCall:
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


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ToolCallError(f"the tool call is not valid JSON ({e.msg} at char {e.pos})") from None


def _hermes(text: str) -> ParsedCalls:
    blocks = _HERMES.findall(text)
    if not blocks:
        return ParsedCalls(found=False)
    return ParsedCalls([_call_of(_loads(b.strip())) for b in blocks])


def _llama3(text: str) -> ParsedCalls:
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
        calls.append(_call_of(obj, "parameters"))
        pos = end
        while pos < len(body) and body[pos] in " \t\r\n;":
            pos += 1
    return ParsedCalls(calls)


def _mistral(text: str) -> ParsedCalls:
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
    return ParsedCalls([_call_of(item) for item in items])


_READERS = {ToolFamily.HERMES: _hermes, ToolFamily.LLAMA3: _llama3, ToolFamily.MISTRAL: _mistral}


def parse_tool_calls(text: str, family: ToolFamily) -> ParsedCalls:
    """The calls `text` holds in `family`'s layout (see the module docstring)."""
    try:
        return _READERS[family](text)
    except ToolCallError as e:
        return ParsedCalls(error=str(e))


def write_call(call: ToolCall, family: ToolFamily) -> str:
    """`call` as a reply of `family` writes it (what its template renders a structured call as)."""
    args = json.dumps(call.arguments, ensure_ascii=False)
    if family is ToolFamily.HERMES:
        return (
            f'<tool_call>\n{{"name": {json.dumps(call.name)}, "arguments": {args}}}\n</tool_call>'
        )
    if family is ToolFamily.LLAMA3:
        return f'{{"name": {json.dumps(call.name)}, "parameters": {args}}}'
    return f'[TOOL_CALLS][{{"name": {json.dumps(call.name)}, "arguments": {args}}}]'


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


# --- one episode's turn rule in tool mode ---


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One call of a reply: its id and the action it stands for, or why it is not stepped
    (`refused`: beyond `calls_per_turn`, which is not an invalid action)."""

    id: str
    action: str | None
    feedback: str = ""
    refused: bool = False


@dataclass(frozen=True, slots=True)
class ToolReading:
    """One reply read in tool mode: its calls in order, or (no call at all) the feedback that
    goes back as a user message."""

    steps: tuple[ToolStep, ...]
    feedback: str = ""


@dataclass(frozen=True)
class ToolReader:
    """One env's tools as the turn rule reads a reply in tool mode."""

    tools: ToolSet
    family: ToolFamily
    calls_per_turn: int = 1

    def hint(self) -> str:
        example = write_call(self.tools.example(), self.family)
        return f"Call one tool per turn, e.g. {example}. The tools are: {self.tools.describe()}."

    def call_id(self, turn: int, index: int) -> str:
        """The id of a call written without one (Mistral's templates take 9 letters/digits)."""
        if self.family is ToolFamily.MISTRAL:
            return f"c{turn:05d}{index:03d}"
        return f"call_{turn}_{index}"

    def read(self, text: str, turn: int) -> ToolReading:
        """The calls of a reply's text, in this reader's family layout."""
        parsed = parse_tool_calls(text, self.family)
        if not parsed.found:
            return ToolReading((), f"Invalid action: the reply calls no tool. {self.hint()}")
        if parsed.error is not None:
            note = f"Invalid tool call: {parsed.error}. {self.hint()}"
            return ToolReading((ToolStep(self.call_id(turn, 0), None, note),))
        return self.read_calls(parsed.calls, turn)

    def read_calls(self, calls: Sequence[ToolCall], turn: int) -> ToolReading:
        """Calls already structured (an API's `tool_calls`), checked and turned into actions."""
        if not calls:
            return ToolReading((), f"Invalid action: the reply calls no tool. {self.hint()}")
        steps = []
        for i, call in enumerate(calls):
            call_id = call.id or self.call_id(turn, i)
            if i >= self.calls_per_turn:
                note = (
                    f"Not executed: at most {self.calls_per_turn} tool call(s) per turn are "
                    f"executed; call {call.name!r} again next turn if it is still needed."
                )
                steps.append(ToolStep(call_id, None, note, refused=True))
                continue
            try:
                steps.append(ToolStep(call_id, self.tools.action_for(call)))
            except ToolCallError as e:
                steps.append(ToolStep(call_id, None, f"Invalid tool call: {e}."))
        return ToolReading(tuple(steps))


def tool_message(content: str, call_id: str) -> dict[str, str]:
    """A tool result as the chat template receives it."""
    return {"role": "tool", "content": content, "tool_call_id": call_id}


def tool_reader(
    env: str, chat: ChatTokenizer | None, parser: str = "auto", calls_per_turn: int = 1
) -> ToolReader:
    """`env`'s tools (as its class declares them) read in the layout `parser` names, or, for
    `auto`, the one `chat`'s template writes (no chat: an API's structured calls, whose layout
    only the feedback's example shows: Hermes)."""
    rows = env_traits(env).tools
    if not rows:
        raise ValueError(
            f"env {env!r}: its tools are unknown here (its class cannot be imported on this "
            f"machine: install its package)"
        )
    if parser != "auto":
        family = ToolFamily(parser)
    else:
        family = ToolFamily.HERMES if chat is None else detect_family(chat)
    return ToolReader(ToolSet.from_wire(rows), family, calls_per_turn)
