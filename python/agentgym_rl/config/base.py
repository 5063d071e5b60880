"""The base every config model derives from: strict keys, attribute docstrings as descriptions.

Contract: an unknown key is an error that names its full key path; a field's docstring is its
description (shown by `--help-config` style tooling and in validation messages).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigModel(BaseModel):
    """A frozen, strict pydantic model: unknown keys fail, values are validated on assignment."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        validate_default=True,
    )
