"""Environment servers for agentgym-rl, and the catalog that finds the envs they serve.

Envs are found through entry points of the group `agentgym_rl.envs` (this package's own and any
installed plugin's) or by a `module:Class` reference (`catalog.py`). Env modules are imported
only when an env is loaded, so importing this package stays cheap.
"""

from __future__ import annotations

from agentgym_envs.catalog import (
    GROUP,
    EnvEntry,
    EnvLoadError,
    describe,
    entries,
    env_class,
    load_env,
)

__all__ = ["GROUP", "EnvEntry", "EnvLoadError", "describe", "entries", "env_class", "load_env"]
