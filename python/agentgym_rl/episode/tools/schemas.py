"""An env's tools: their OpenAI function schemas, the calls a reply makes, and the text action each
call stands for (`ToolSet`; see the package docstring)."""

from __future__ import annotations

import enum
import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


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
