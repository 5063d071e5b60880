"""Environment dependencies, checked before a run starts anything.

Contract: `env_problems(names)` returns one message per environment that cannot be served on
this machine: the env servers' package `agentgym_envs` is not installed, the env is unknown to
its registry, its module fails to import (a missing Python package), or an executable it needs
(Java for SciWorld, Chromium for WebArena) is not on PATH. Each message names the fix. Importing an env module is what `env serve` does first,
so a check that passes here means the server will at least load.
"""

from __future__ import annotations

import importlib
import shutil

from agentgym_rl.env_discovery import EnvsNotInstalled, env_registry

# env name -> (executable, how to get it); envs added later declare theirs here or as a module
# attribute REQUIRED_EXECUTABLES = {"java": "how to install"}.
_CHROMIUM = {
    "chromium": "install Chromium (as root: `apt-get install chromium`; scripts/install.sh does)"
}
REQUIRED_EXECUTABLES: dict[str, dict[str, str]] = {
    "sciworld": {"java": "install a Java runtime (e.g. `apt-get install default-jre-headless`)"},
    "webarena": _CHROMIUM,
    "miniwob": _CHROMIUM,
}


def env_problems(names: list[str], where: str = "env_servers") -> list[str]:
    """Why each of `names` cannot be served here (empty: all can)."""
    try:
        envs = env_registry()
    except EnvsNotInstalled as e:
        return [f"{where}: {e}"]
    problems: list[str] = []
    for i, name in enumerate(names):
        key = f"{where}.{i}.env"
        if name not in envs:
            known = ", ".join(sorted(envs))
            problems.append(f"{key}: unknown environment {name!r}; known: {known}")
            continue
        module_name, _, _ = envs[name]
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            problems.append(
                f"{key}: environment {name!r} cannot be loaded: {e}. Install its dependencies "
                "(`pip install agentgym-envs` installs those of the built-in envs; an env with "
                "heavy needs has an extra, e.g. `pip install 'agentgym-envs[sciworld]'`)"
            )
            continue
        needs = {
            **REQUIRED_EXECUTABLES.get(name, {}),
            **getattr(module, "REQUIRED_EXECUTABLES", {}),
        }
        for exe, fix in needs.items():
            if shutil.which(exe) is None:
                problems.append(f"{key}: environment {name!r} needs `{exe}` on PATH: {fix}")
    return problems
