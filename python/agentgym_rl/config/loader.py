"""YAML files plus `key.path=value` overrides into validated config models.

Contract: `load_config(Model, path, overrides)` reads the YAML mapping at `path` (or starts
empty), applies each override in order (values are parsed as YAML scalars/flow collections, so
`a.b=3`, `a.b=[1, 2]` and `a.b=null` all work; a numeric path component indexes a list), then
validates. Every failure raises `ConfigError` whose message names the full key path
(`buffer.max_staleness: Input should be greater than or equal to 0`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A config file or override is malformed or does not validate."""


def parse_override(text: str) -> tuple[list[str], Any]:
    """`"a.b.c=value"` -> (["a", "b", "c"], parsed value)."""
    key, sep, raw = text.partition("=")
    path = key.strip().split(".")
    if not sep or not all(path):
        raise ConfigError(f"override {text!r} is not key.path=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"override {text!r}: value is not YAML: {e}") from None
    return path, value


def apply_override(data: dict[str, Any], path: list[str], value: Any) -> None:
    """Set `data[path[0]][path[1]]... = value`, creating mappings on the way."""
    node: Any = data
    for depth, part in enumerate(path[:-1]):
        where = ".".join(path[: depth + 1])
        if isinstance(node, list):
            node = node[_index(node, part, where)]
            continue
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict | list):
            raise ConfigError(f"{where}: is a {type(child).__name__}, not a mapping")
        node = child
    last = path[-1]
    if isinstance(node, list):
        node[_index(node, last, ".".join(path))] = value
    else:
        node[last] = value


def _index(node: list[Any], part: str, where: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise ConfigError(f"{where}: no item {part!r} in a list of {len(node)}")
    return int(part)


def format_errors(error: ValidationError) -> str:
    """One line per problem, each starting with its key path (a model-level check names its
    keys in its message, one problem per line)."""
    lines = []
    for item in error.errors():
        message = item["msg"].removeprefix("Value error, ")
        where = ".".join(str(p) for p in item["loc"])
        for line in message.splitlines():
            lines.append(f"  {where}: {line}" if where else f"  {line}")
    return "invalid config:\n" + "\n".join(lines)


def load_config(model: type[M], path: str | Path | None, overrides: Sequence[str] = ()) -> M:
    """Read `path` (YAML), apply `overrides`, validate as `model`."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"{path}: {e}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        data = loaded or {}
    for text in overrides:
        apply_override(data, *parse_override(text))
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_errors(e)) from None
