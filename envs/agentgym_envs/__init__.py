"""Environment servers for agentgym-rl: the registry of served envs.

Env modules are imported only when an env is loaded, so listing envs stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentgym_envs.server.base import Environment

# name -> (module, class, one-line description)
ENVS: dict[str, tuple[str, str, str]] = {
    "babyai": (
        "agentgym_envs.babyai.env",
        "BabyAIEnvironment",
        "BabyAI grid worlds (minigrid): 40 levels, text view, BFS-planned high-level actions",
    ),
    "textcraft": (
        "agentgym_envs.textcraft.env",
        "TextCraftEnvironment",
        "Crafting Minecraft 1.16.1 items from real recipes, goal depth 1-4",
    ),
    "sciworld": (
        "agentgym_envs.sciworld.env",
        "SciWorldEnvironment",
        "ScienceWorld science tasks (4,639 task variations), pooled simulator JVMs",
    ),
    "searchqa": (
        "agentgym_envs.searchqa.env",
        "SearchQAEnvironment",
        "Deep Search (Search-R1 format): search a passage corpus (bm25 or dense), answer by "
        "exact match; generated 1-3-hop questions",
    ),
    "webarena": (
        "agentgym_envs.web.env",
        "WebArenaEnvironment",
        "Web navigation on real Chromium in WebArena's format (accessibility tree, click/type/"
        "stop commands) over sites served here or self-hosted WebArena sites",
    ),
    "miniwob": (
        "agentgym_envs.web.env",
        "MiniWoBEnvironment",
        "MiniWoB++ task pages (miniwob package) on real Chromium, WebArena's observation and "
        "actions, scored by the task's own reward",
    ),
    "noop": (
        "agentgym_envs.noop",
        "NoopEnvironment",
        "Answers every step at once (overhead benches)",
    ),
}


def load_env(name: str, **options: str) -> Environment:
    """Instantiate the environment registered as `name`, or the `Environment` subclass a
    reference `package.module:Class` names (an env of the caller's own, served under the class's
    `name`), with its own `options` (strings, as given on the command line; an env rejects
    options it does not know with a ValueError)."""
    if ":" in name:
        factory = _referenced(name)
    elif name not in ENVS:
        raise KeyError(f"unknown env {name!r}; known: {', '.join(sorted(ENVS))}")
    else:
        module, cls, _ = ENVS[name]
        factory = getattr(importlib.import_module(module), cls)
    if not options:
        return factory()
    try:
        return factory(**options)
    except TypeError:
        raise ValueError(f"env {name!r} does not take options {sorted(options)}") from None


def _referenced(reference: str) -> type[Environment]:
    """The class `package.module:Class` names; KeyError saying why it is not an env."""
    from agentgym_envs.server.base import Environment

    module, _, qualname = reference.partition(":")
    try:
        found: object = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as e:
        raise KeyError(f"env {reference!r} cannot be loaded: {e}") from None
    if not (isinstance(found, type) and issubclass(found, Environment)):
        raise KeyError(f"env {reference!r} is not an Environment subclass")
    return found
