"""The env servers' package as the rest of agentgym-rl finds it: its catalog and its data files.

Contract: the env servers are the installed package `agentgym_envs` (distribution agentgym-envs,
`envs/` in a checkout; agentgym-rl depends on it), whose catalog finds every env, built-in or a
user's plugin (entry points of `agentgym_rl.envs`, or `module:Class`). `env_entries()` lists them,
`env_class(name)` imports one, `load_env(name, **options)` builds one in this process; each
raises `EnvsNotInstalled` (naming the fix) when the package is missing. `env_traits(env)` is what
the rollout side needs to know of an env (its action format, prompt, HTTP dialect, score rule),
read from the env's own declarations: defaults when the env cannot be imported here (an env
served from another machine: a config may state each). `split_rows(env, split)` are the tasks
of a split an env declares by name.

Split files and the other data the envs ship are package data of `agentgym_envs`, and configs
name them as in a checkout: `envs/agentgym_envs/babyai/data/train.json`. `shipped_path(path)`
is the one resolution of such a path: as given when it exists from the working directory (or is
absolute), otherwise the part after its `agentgym_envs` component inside the installed package,
so a config given by path works from any directory, also when installed from wheels.
`portable_path(path)` is the inverse a record keeps. Import-light: nothing heavy is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType

ENVS_PACKAGE = "agentgym_envs"
INSTALL_HINT = "`pip install agentgym-envs`, or `pip install -e envs` in a checkout"


class EnvsNotInstalled(ImportError):
    """The env servers' package `agentgym_envs` cannot be imported here."""


def envs_installed() -> bool:
    """Whether `agentgym_envs` is importable (without importing it)."""
    return importlib.util.find_spec(ENVS_PACKAGE) is not None


def env_entries() -> dict[str, Any]:
    """name -> `EnvEntry` (reference, package) of every registered env, nothing imported."""
    entries: dict[str, Any] = _package().entries()
    return entries


def env_class(name: str) -> Any:
    """The `Environment` class `name` (a registered name or `module:Class`) names, checked;
    `agentgym_envs.EnvLoadError` says why not."""
    return _package().env_class(name)


def load_env(name: str, **options: str) -> Any:
    """The environment `name` names, built in this process with its own `options` (as
    `env serve --env-option` gives them)."""
    return _package().load_env(name, **options)


def env_name(name: str) -> str:
    """The env's name (its task ids' prefix) for a name or a `module:Class` reference."""
    return str(env_class(name).name) if ":" in name else name


@dataclass(frozen=True, slots=True)
class EnvTraits:
    """What the rollout side reads of an env's declarations (`server/base.py` documents each)."""

    action_format: str = "react"
    system_prompt: str | None = None
    http_dialect: str = "agentgym"
    score_scale: float = 1.0
    success_at: float | None = None
    description: str = ""
    tools: tuple[dict[str, Any], ...] = ()
    """Its tools as served (`Tool.wire()`); none when it cannot be imported here."""
    rule: str | None = None
    """What its scripted rule does (`Environment.rule`); None: it declares none."""
    state_ignore: str | None = None
    """What its observations say that is not the state (`Environment.state_ignore`)."""


@cache
def env_traits(env: str) -> EnvTraits:
    """`env`'s declared traits; the defaults when it cannot be imported in this process."""
    try:
        cls = env_class(env)
    except (EnvsNotInstalled, LookupError):
        return EnvTraits()
    return EnvTraits(
        cls.action_format,
        cls.system_prompt,
        cls.http_dialect,
        cls.score_scale,
        cls.success_at,
        cls.description,
        tuple(tool.wire() for tool in cls.tool_set()),
        getattr(cls, "rule", None),
        getattr(cls, "state_ignore", None),
    )


def yardstick_rates(
    env: str,
    options: dict[str, str],
    rows: list[dict[str, str]],
    *,
    turn_cap: int,
    tries: dict[str, int],
    seed: int = 0,
) -> dict[str, dict[str, float]] | None:
    """Success of each of `env`'s own yardstick policies in `tries` ("random": its random valid
    actions, "rule": its scripted rule; policy -> episodes per task) on split `rows`, per
    category and "all", played in this process on one built env; None when the env declares no
    rule but one is asked for (or cannot be imported here)."""
    try:
        from agentgym_envs.chance import declares_rule, yardstick_success
    except ImportError:
        return None
    try:
        built = load_env(env, **options)
    except (EnvsNotInstalled, LookupError):
        return None
    try:
        if "rule" in tries and not declares_rule(built):
            return None
        return {
            policy: yardstick_success(built, rows, turn_cap, n, seed, policy)
            for policy, n in tries.items()
        }
    finally:
        built.close()


def is_split_name(split: str | Path) -> bool:
    """Whether `split` names a split an env declares (`train`) rather than a file."""
    path = Path(split)
    return len(path.parts) == 1 and not path.suffix


def split_rows(env: str, split: str, seed: int = 0) -> list[dict[str, Any]]:
    """The `{"item_id", "category"}` rows of the split `env` declares as `split`; LookupError
    (naming the env's splits) when it declares none so named."""
    rows: list[dict[str, Any]] = env_class(env).tasks(split, seed)
    return rows


def shipped_path(path: str | Path) -> Path:
    """The file `path` names: `path` itself when it is absolute or exists from the working
    directory; else, for a path with an `agentgym_envs` component, that file inside the installed
    package when it exists there; else `path` unchanged (its reader reports it missing)."""
    path = Path(path)
    if path.is_absolute() or path.exists() or ENVS_PACKAGE not in path.parts:
        return path
    inside = path.parts[path.parts.index(ENVS_PACKAGE) + 1 :]
    for root in _package_roots():
        candidate = root.joinpath(*inside)
        if candidate.exists():
            return candidate
    return path


def portable_path(path: str | Path) -> str:
    """How a record names `path`: `envs/agentgym_envs/<rest>` for a file of the installed
    package (it resolves anywhere, see `shipped_path`), relative to the working directory for a
    file below it, else `path` as given (no machine path where one can be avoided)."""
    resolved = shipped_path(path).resolve()
    for root in _package_roots():
        if resolved.is_relative_to(root.resolve()):
            return str(Path("envs", ENVS_PACKAGE, resolved.relative_to(root.resolve())))
    cwd = Path.cwd().resolve()
    return str(resolved.relative_to(cwd)) if resolved.is_relative_to(cwd) else str(path)


def _package() -> ModuleType:
    try:
        return importlib.import_module(ENVS_PACKAGE)
    except ModuleNotFoundError as e:
        if e.name != ENVS_PACKAGE:
            raise
        raise EnvsNotInstalled(
            f"the env servers' package {ENVS_PACKAGE} is not installed: {INSTALL_HINT}"
        ) from None


def _package_roots() -> list[Path]:
    spec = importlib.util.find_spec(ENVS_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


__all__ = [
    "ENVS_PACKAGE",
    "INSTALL_HINT",
    "EnvTraits",
    "EnvsNotInstalled",
    "env_class",
    "env_entries",
    "env_name",
    "env_traits",
    "envs_installed",
    "is_split_name",
    "load_env",
    "portable_path",
    "shipped_path",
    "split_rows",
]
