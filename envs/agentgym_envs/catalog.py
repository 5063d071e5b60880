"""Finding envs: the one discovery path for the built-in envs and a user's own.

Contract: an env is an `Environment` subclass (`server/base.py`) named two ways:
- by name, through an entry point of the group `agentgym_rl.envs` (name: the env's name,
  value: `module:Class`) of any installed distribution; this package registers its own envs so;
- by reference, `package.module:Class`, importable from the working directory or the path,
  served under the class's `name`.

An env loaded by reference is known by its name from then on, in this process and in the
processes it starts (`REFERENCES_VAR` carries `name=module:Class` pairs to them), so that a run
started from a reference finds the env by name in its rollout and env server processes too.

`entries()` lists the entry points without importing them; `env_class(name_or_reference)`
imports and checks one (`EnvLoadError` says what is wrong: unknown, failing import, not an
`Environment`, abstract methods left, a name two packages claim, an entry point whose name is not
the class's); `load_env` builds one with its options checked against the declared ones. A broken
plugin fails only where it is asked for: the other envs list, serve and train as before.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import typing
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from agentgym_envs.server.base import ACTION_FORMATS, Environment, EnvOption, Episode
from agentgym_envs.server.tools import Tool

GROUP = "agentgym_rl.envs"
"""The entry-point group envs are registered in."""
REFERENCES_VAR = "AGENTGYM_RL_ENV_REFERENCES"
"""Environment variable of `name=module:Class` pairs (comma-separated): envs loaded by reference
in a parent process, found by name here."""


class EnvLoadError(LookupError):
    """An env that cannot be found or used; the message says which and why. `missing_module`:
    the import failed for want of that module (an extra or a dependency not installed here)."""

    def __init__(self, message: str, missing_module: str | None = None) -> None:
        super().__init__(message)
        self.missing_module = missing_module

    def __str__(self) -> str:  # LookupError would quote the message as a KeyError does
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class EnvEntry:
    """One registered env, not yet imported."""

    name: str
    reference: str
    """`module:Class`."""
    package: str
    """The distribution that registers it, with its version (`agentgym-envs 0.1.0`)."""
    claimed_by: tuple[str, ...] = ()
    """Every package that registers this name, when more than one does (then it is refused)."""


def entries() -> dict[str, EnvEntry]:
    """name -> entry of every registered env (imports nothing)."""
    found: dict[str, list[EnvEntry]] = {}
    for point in entry_points(group=GROUP):
        dist = getattr(point, "dist", None)
        package = f"{dist.name} {dist.version}" if dist is not None else "?"
        found.setdefault(point.name, []).append(EnvEntry(point.name, point.value, package))
    for name, reference in _references().items():
        if name not in found:
            found[name] = [EnvEntry(name, reference, "(by reference)")]
    out: dict[str, EnvEntry] = {}
    for name, claims in sorted(found.items()):
        packages = tuple(sorted({c.package for c in claims}))
        out[name] = EnvEntry(
            name, claims[0].reference, claims[0].package, packages if len(packages) > 1 else ()
        )
    return out


def env_class(name: str) -> type[Environment]:
    """The class registered as `name`, or named by a `module:Class` reference, checked."""
    if ":" in name:
        cls = _checked(name, name, None)
        _remember(cls.name, name)
        return cls
    registered = entries()
    if name not in registered:
        known = ", ".join(registered) or "none"
        raise EnvLoadError(f"unknown env {name!r}; known: {known} (or give module:Class)")
    entry = registered[name]
    if entry.claimed_by:
        raise EnvLoadError(
            f"env {name!r} is registered by more than one package ({', '.join(entry.claimed_by)}):"
            " uninstall one, or name the class as module:Class"
        )
    return _checked(name, entry.reference, entry.name)


def _references() -> dict[str, str]:
    pairs = (item.partition("=") for item in os.environ.get(REFERENCES_VAR, "").split(","))
    return {name: ref for name, _, ref in pairs if name and ref}


def _remember(name: str, reference: str) -> None:
    known = _references()
    if known.get(name) != reference and name not in _entry_point_names():
        known[name] = reference
        os.environ[REFERENCES_VAR] = ",".join(f"{n}={r}" for n, r in sorted(known.items()))


def _entry_point_names() -> set[str]:
    return {point.name for point in entry_points(group=GROUP)}


def load_env(name: str, **options: Any) -> Environment:
    """The env `name` names (see `env_class`), built with `options` (strings from a command
    line, or typed values) converted and checked against its declared options."""
    cls = env_class(name)
    return cls(**parse_options(cls, options))


def parse_options(cls: type[Environment], given: dict[str, Any]) -> dict[str, Any]:
    """`given` as the constructor's keyword arguments: declared options converted to their type
    (ValueError naming a bad or unknown one); an env that declares none gets its values as given,
    their names checked against its signature unless it takes `**options`."""
    if not cls.options and _takes_any_keyword(cls):
        return dict(given)  # `**options`: the env reads and checks them itself
    known = {option.name: option for option in declared_options(cls)}
    unknown = sorted(set(given) - set(known))
    if unknown:
        names = ", ".join(known) or "none"
        raise ValueError(f"env {cls.name!r} does not take options {unknown} (its options: {names})")
    if not cls.options:
        return dict(given)  # undeclared: the env converts its own strings
    return {key: known[key].parse(cls.name, value) for key, value in given.items()}


def declared_options(cls: type[Environment]) -> tuple[EnvOption, ...]:
    """The env's options: those it declares, else its constructor's keyword parameters (as
    strings, their defaults as given)."""
    if cls.options:
        return cls.options
    params = inspect.signature(cls.__init__).parameters.values()
    return tuple(
        EnvOption(p.name, str, None if p.default is p.empty else p.default)
        for p in params
        if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


def _takes_any_keyword(cls: type[Environment]) -> bool:
    params = inspect.signature(cls.__init__).parameters.values()
    return any(p.kind is p.VAR_KEYWORD for p in params)


@cache
def _checked(name: str, reference: str, registered_as: str | None) -> type[Environment]:
    cls = _import(name, reference)
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        raise EnvLoadError(
            f"env {name!r}: {reference} is not a subclass of agentgym_envs.server.base.Environment"
        )
    problems = _problems(cls)
    if registered_as is not None and getattr(cls, "name", None) != registered_as:
        problems.append(f"registered as {registered_as!r} but its `name` is {cls.name!r}")
    if problems:
        raise EnvLoadError(f"env {name!r} ({reference}): {'; '.join(problems)}")
    return cls


def _import(name: str, reference: str) -> Any:
    module_name, _, qualname = reference.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # a reference may name a module of the working directory
    try:
        found: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except ModuleNotFoundError as e:  # an extra or a dependency not installed here
        raise EnvLoadError(
            f"env {name!r} cannot be loaded from {reference}: it needs the module {e.name!r}, "
            "not installed here",
            missing_module=e.name,
        ) from None
    except Exception as e:  # a plugin may fail any way while importing: report, never crash
        raise EnvLoadError(f"env {name!r} cannot be loaded from {reference}: {e!r}") from None
    return found


def _problems(cls: type[Environment]) -> list[str]:
    problems = []
    if not isinstance(getattr(cls, "name", None), str) or not cls.name:
        problems.append("it declares no `name`")
    if cls.__abstractmethods__:
        problems.append(f"it does not implement {', '.join(sorted(cls.__abstractmethods__))}")
    if cls.action_format not in ACTION_FORMATS:
        problems.append(
            f"action_format {cls.action_format!r} is not one of {', '.join(ACTION_FORMATS)}"
        )
    episode = _episode_class(cls)
    if episode is not None and episode.__abstractmethods__:
        missing = ", ".join(sorted(episode.__abstractmethods__))
        problems.append(f"its episode {episode.__name__} does not implement {missing}")
    return problems


def _episode_class(cls: type[Environment]) -> type[Episode] | None:
    """The episode class `new_episode` is annotated to return, when it names one."""
    try:
        returned = typing.get_type_hints(cls.new_episode).get("return")
    except Exception:  # an annotation that does not resolve tells nothing
        return None
    ok = isinstance(returned, type) and issubclass(returned, Episode) and returned is not Episode
    return returned if ok else None


def describe(cls: type[Environment]) -> dict[str, Any]:
    """What `env list -v NAME` shows of an env: its declarations."""
    return {
        "name": cls.name,
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "description": cls.description or (inspect.getdoc(cls) or "").split("\n")[0],
        "action format": cls.action_format,
        "http dialect": cls.http_dialect,
        "system prompt": cls.system_prompt or f"(the generic {cls.action_format} prompt)",
        "splits": cls.split_names(),
        "score": f"reward = score / {cls.score_scale:g}; success at reward "
        + (f">= {cls.success_at:g}" if cls.success_at is not None else "> 0"),
        "needs": dict(cls.needs),
        "options from": "keywords" if not cls.options and _takes_any_keyword(cls) else "declared",
        "options": [
            {
                "name": o.name,
                "type": o.type.__name__,
                "default": o.default,
                "help": o.help,
                **({"choices": list(o.choices)} if o.choices else {}),
                **({"minimum": o.minimum} if o.minimum is not None else {}),
            }
            for o in declared_options(cls)
        ],
        "tools": [_tool_line(t) for t in cls.tool_set()],
    }


def _tool_line(tool: Tool) -> str:
    """`type(element_id: integer, text, press_enter: boolean = true)  Click an element ...`
    (a string argument shows no type, one of an enum its choices)."""
    args = []
    for p in tool.params:
        arg = p.name
        if p.enum:
            arg += f": {'|'.join(p.enum)}"
        elif p.type != "string":
            arg += f": {p.type}"
        args.append(arg if p.required else f"{arg} = {json.dumps(p.default)}")
    return f"{tool.name}({', '.join(args)})  {tool.description}"
