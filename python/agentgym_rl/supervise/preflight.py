"""Environment dependencies, checked before a run starts anything.

Contract: `env_problems(names)` returns one message per environment that cannot be served on
this machine: the env servers' package `agentgym_envs` is not installed, the env is unknown to
its catalog or broken (its module fails to import, a missing Python package; it misses a method;
two packages claim its name), or a program it declares it needs (`needs`: Java for SciWorld,
Chromium for the web envs) is not on PATH. Each message names the fix. Loading the env's class is
what `env serve` does first, so a check that passes here means the server will at least load.
"""

from __future__ import annotations

import shutil

from agentgym_rl.env_discovery import EnvsNotInstalled, env_class

_INSTALL_HINT = (
    "Install its dependencies (`pip install agentgym-envs` installs those of the built-in envs; "
    "an env with heavy needs has an extra, e.g. `pip install 'agentgym-envs[sciworld]'`)"
)


def env_problems(names: list[str], where: str = "env_servers") -> list[str]:
    """Why each of `names` (env names or `module:Class` references) cannot be served here."""
    problems: list[str] = []
    for i, name in enumerate(names):
        key = f"{where}.{i}.env"
        try:
            cls = env_class(name)
        except EnvsNotInstalled as e:
            return [f"{where}: {e}"]
        except LookupError as e:
            hint = f". {_INSTALL_HINT}" if getattr(e, "missing_module", None) else ""
            problems.append(f"{key}: {e}{hint}")
            continue
        for program, fix in cls.needs.items():
            if shutil.which(program) is None:
                problems.append(f"{key}: environment {name!r} needs `{program}` on PATH: {fix}")
    return problems
