"""The base every config model derives from: strict keys, attribute docstrings as descriptions,
and the `Wired` mark of the fields `agentgym-rl train` fills in.

Contract: an unknown key is an error that names its full key path; a field's docstring is its
description (shown in `--help` of the flags made from it and in validation messages). A field
annotated `Annotated[T, Wired("...")]` is one that `train`'s planner (`supervise/plan.py`) writes
into the per-process config; the section of a train config that describes that process is the
same model without those fields (`RolloutSection` for `RolloutConfig`, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict

from agentgym_rl.config.loader import load_config

C = TypeVar("C", bound="ConfigModel")


class ConfigModel(BaseModel):
    """A frozen, strict pydantic model: unknown keys fail, values are validated on assignment."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        validate_default=True,
    )

    @classmethod
    def from_yaml(cls: type[C], path: str | Path | None, overrides: Sequence[str] = ()) -> C:
        """Read `path` (YAML; None: start empty), apply `key.path=value` overrides, validate.
        Every problem raises `ConfigError` naming its key path."""
        return load_config(cls, path, overrides)

    def to_yaml(self, path: str | Path | None = None) -> str:
        """This config as YAML (every field, defaults included); written to `path` if given."""
        text: str = yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)
        if path is not None:
            Path(path).write_text(text)
        return text


@dataclass(frozen=True)
class Wired:
    """Marks a field `train` fills in; `source` says from what (shown when a train config sets
    it)."""

    source: str


def wired_fields(model: type[BaseModel]) -> dict[str, Wired]:
    """The fields of `model` marked `Wired`, with their marks."""
    return {
        name: mark
        for name, info in model.model_fields.items()
        for mark in info.metadata
        if isinstance(mark, Wired)
    }
