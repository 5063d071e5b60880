"""Command-line flags made from config models: one definition of an option (its name, type,
bounds, default and help) whether it is written in YAML or typed after a command.

Contract: `add_flags(parser, Model)` adds `--field-name` for each field of a flat model: a bool
is `--x/--no-x`, a `Literal` or an enum gives the choices, a field without a default is a
required flag, a list field `env_options` is the repeatable `--env-option`, and a dict field
`env_addresses` the repeatable `--env-address KEY=VALUE` (handed to the model as the list of
strings, which its validator reads). A field that is `T | dict[...]` (one value, or one per env)
takes T on the command line. The help is the field's docstring and its default. A flag left out is absent from the parsed namespace (argparse.SUPPRESS), so the model's
own default applies (or `base`'s value): `from_flags(Model, args, base=..., **given)` validates
what was given and raises
`ConfigError` naming the flag (`--top-p: Input should be less than or equal to 1`).
`to_flags(model)` is the inverse: the argv giving the fields that were set in `model`.
"""

from __future__ import annotations

import argparse
import enum
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from agentgym_rl.config.loader import ConfigError

M = TypeVar("M", bound=BaseModel)
_Adder = argparse.ArgumentParser | argparse._ArgumentGroup


def flag_of(name: str, info: FieldInfo) -> str:
    """`top_p` -> `--top-p`; a list field `env_options` -> `--env-option`, a dict field
    `env_addresses` -> `--env-address`."""
    if _is_list(info.annotation) or _is_dict(info.annotation):
        name = name[:-2] if name.endswith("sses") else name.removesuffix("s")
    return "--" + name.replace("_", "-")


def add_flags(parser: _Adder, model: type[BaseModel], exclude: Sequence[str] = ()) -> None:
    """A flag for every field of `model` but those in `exclude` (see the module docstring)."""
    for name, info in model.model_fields.items():
        if name in exclude:
            continue
        kind = _unwrap(info.annotation)
        options: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS}
        options["required"] = info.is_required()
        options["help"] = _help(info)
        if kind is bool:
            options["action"] = argparse.BooleanOptionalAction
        elif _is_list(info.annotation):
            options.update(action="append", metavar="VALUE")
        elif _is_dict(info.annotation):
            options.update(action="append", metavar="KEY=VALUE")
        elif get_origin(kind) is Literal:
            options["choices"] = list(get_args(kind))
        elif isinstance(kind, type) and issubclass(kind, enum.Enum):
            options["choices"] = [member.value for member in kind]
        else:
            options["type"] = kind if kind in (int, float, Path) else str
            options["metavar"] = {int: "N", float: "X", Path: "PATH"}.get(kind, "TEXT")
        parser.add_argument(flag_of(name, info), **options)


def from_flags(
    model: type[M], args: argparse.Namespace, *, base: M | None = None, **given: Any
) -> M:
    """`model` from the flags `add_flags` made (those given on the command line) and `given`,
    over `base`'s values (else the model's defaults)."""
    values = {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}
    start = base.model_dump() if base is not None else {}
    try:
        return model.model_validate({**start, **values, **given})
    except ValidationError as e:
        lines = []
        for item in e.errors():
            loc = [str(p) for p in item["loc"]]
            info = model.model_fields.get(loc[0]) if loc else None
            where = flag_of(loc[0], info) if info is not None else ".".join(loc) or "flags"
            lines.append(f"{where}: {item['msg']}")
        raise ConfigError("; ".join(lines)) from None


def to_flags(model: BaseModel) -> list[str]:
    """The argv that sets the fields set in `model` (left-out ones keep their defaults)."""
    argv: list[str] = []
    fields = type(model).model_fields
    for name in fields:
        if name not in model.model_fields_set:
            continue
        value, flag = getattr(model, name), flag_of(name, fields[name])
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, list):
            argv += [a for item in value for a in (flag, _flag_value(item))]
        elif isinstance(value, dict) and _is_dict(fields[name].annotation):
            pairs = [
                (k, v) for k, vs in value.items() for v in (vs if isinstance(vs, list) else [vs])
            ]
            argv += [a for k, v in pairs for a in (flag, f"{k}={_flag_value(v)}")]
        elif value is not None:
            argv += [flag, _flag_value(value)]
    return argv


def _flag_value(item: Any) -> str:
    """A value as its flag takes it: a section (a model) as JSON, an enum member as its value."""
    if isinstance(item, BaseModel):
        return item.model_dump_json(exclude_unset=True)
    return str(item.value) if isinstance(item, enum.Enum) else str(item)


def _unwrap(annotation: Any) -> Any:
    """`int | None` -> int, `int | dict[str, int]` -> int (what a given flag parses to)."""
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        one = [a for a in rest if get_origin(a) is not dict] if len(rest) > 1 else rest
        return _unwrap(one[0]) if len(one) == 1 else str
    if get_origin(annotation) is Annotated:
        return get_args(annotation)[0]
    return annotation


def _is_list(annotation: Any) -> bool:
    return get_origin(_unwrap(annotation)) is list


def _is_dict(annotation: Any) -> bool:
    return get_origin(_unwrap(annotation)) is dict


def _help(info: FieldInfo) -> str:
    text = " ".join((info.description or "").split()).replace("%", "%%")
    default = info.get_default(call_default_factory=True)
    if default is None or isinstance(default, bool) or default in ([], {}):
        return text
    return f"{text} (default {default})"


__all__ = ["add_flags", "flag_of", "from_flags", "to_flags"]
