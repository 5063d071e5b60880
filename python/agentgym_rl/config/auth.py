"""Typed `auth` section shared by `learn` and `serve-rollouts` (torch-free: pydantic only).

Where the run's secret comes from and whether a process may run without one; the rules are
in `agentgym_rl.auth.secret`. The secret itself never appears in a config (nor on a command
line): only the path of the file that holds it.
"""

from __future__ import annotations

from pathlib import Path

from agentgym_rl.config.base import ConfigModel


class AuthConfig(ConfigModel):
    """Message authentication of the group and weight streams."""

    secret_file: Path | None = None
    """File holding the run's secret (`agentgym-rl secret PATH` writes one, mode 0600). None:
    the environment variable AGENTGYM_RL_SECRET, if set (`train` sets it for its processes)."""
    allow_unauthenticated: bool = False
    """Run without a secret even where a stream reaches beyond this host (a warning is
    logged). Without this, such a process refuses to start."""


__all__ = ["AuthConfig"]
