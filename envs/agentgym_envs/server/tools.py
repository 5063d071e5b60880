"""An env's actions described as tools: what an agent speaking native tool calls is offered.

A `Tool` is one OpenAI function schema (name, description, JSON-schema parameters) plus the
text action a call of it stands for, as a template of its arguments (`click [{element_id}]`):
the env itself still receives text actions, so declaring tools changes nothing in an env's
`step`. An env that declares none is offered `generic_tool()`: `act(action)`, with an enum of
the actions when the env has a fixed set. Served as `tool_set(env_class)` by both protocols
(`GET /tools`, ZeroMQ op `tools`); the rollout side reads it in `agentgym_rl.episode.tools`.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

PARAM_TYPES = ("string", "integer", "number", "boolean")
"""JSON-schema types a parameter may have; a template writes a boolean as 1 or 0."""


@dataclass(frozen=True, slots=True)
class Param:
    """One argument of a tool."""

    name: str
    type: str = "string"
    description: str = ""
    enum: tuple[str, ...] = ()
    required: bool = True
    default: Any = None
    """The value an optional argument left out takes in the action template."""

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"param {self.name!r}: type {self.type!r} not in {PARAM_TYPES}")

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.description:
            out["description"] = self.description
        if self.enum:
            out["enum"] = list(self.enum)
        return out


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the agent may call and the text action it stands for."""

    name: str
    description: str
    action: str
    """The text action, `{param}` standing for each argument (`craft {target} using {ingredients}`)."""
    params: tuple[Param, ...] = ()

    def __post_init__(self) -> None:
        named = {p.name for p in self.params}
        for placeholder in _placeholders(self.action):
            if placeholder not in named:
                raise ValueError(f"tool {self.name!r}: action names unknown {{{placeholder}}}")

    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema (what a chat template's `tools=` receives)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {p.name: p.schema() for p in self.params},
                    "required": [p.name for p in self.params if p.required],
                },
            },
        }

    def wire(self) -> dict[str, Any]:
        """The served form: the schema and, beside it, the action template and defaults."""
        defaults = {p.name: p.default for p in self.params if not p.required}
        return {"schema": self.schema(), "action": self.action, "defaults": defaults}


def generic_tool(choices: tuple[str, ...] = ()) -> Tool:
    """`act(action)`: the tool of an env that declares none (`choices`: its fixed actions)."""
    return Tool(
        "act",
        "Take one action in the environment: one of the actions the observation lists.",
        "{action}",
        (Param("action", "string", "The action, written as the environment lists it.", choices),),
    )


def _placeholders(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]
