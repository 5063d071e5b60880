"""The env servers' package as the rest of agentgym-rl finds it: its registry and its data files.

Contract: the env servers are the installed package `agentgym_envs` (distribution agentgym-envs,
`envs/` in a checkout; agentgym-rl depends on it). `env_registry()` is its registry of served
envs and `load_env(name, **options)` builds one in this process; both raise `EnvsNotInstalled`
(naming the fix) when the package is missing. Nothing here puts a folder on `sys.path`.

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


def env_registry() -> dict[str, tuple[str, str, str]]:
    """name -> (module, class, one-line description) of every env `agentgym_envs` serves."""
    registry: dict[str, tuple[str, str, str]] = _package().ENVS
    return registry


def load_env(name: str, **options: str) -> Any:
    """The environment registered as `name`, built in this process with its own `options` (as
    `env serve --env-option` gives them)."""
    return _package().load_env(name, **options)


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
    "EnvsNotInstalled",
    "env_registry",
    "envs_installed",
    "load_env",
    "portable_path",
    "shipped_path",
]
