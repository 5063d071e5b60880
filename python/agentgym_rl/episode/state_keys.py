"""The key of the state a turn acts from, for step-level credit (GiGPO-style anchor states).

Contract: `state_key(env, observation)` is a 32-bit hash (CRC-32) of `observation` with what
the env declares is not state removed (`Environment.state_ignore`, a regular expression; Maze:
"12 moves left.") and whitespace collapsed. Two turns of one group whose keys are equal started
from the same state, so the learner compares what followed them (`learner/step_credit.py`).
The observation a turn acts from is the env's last one the model read: the first observation
for the first turn, then the reply of the last turn that stepped the env (its observation, or a
tool turn's results joined). A parser's feedback or an env's refusal is not a state (its text is
the same whatever the state), and the state did not change: a turn after one acts from the same
state as the turn before.
"""

from __future__ import annotations

import re
import zlib
from functools import cache

from agentgym_rl.env_discovery import env_traits

_SPACE = re.compile(r"\s+")


@cache
def _ignored(env: str) -> re.Pattern[str] | None:
    pattern = env_traits(env).state_ignore
    return re.compile(pattern) if pattern else None


def state_key(env: str, observation: str) -> int:
    """See the module docstring."""
    ignored = _ignored(env)
    text = ignored.sub("", observation) if ignored is not None else observation
    return zlib.crc32(_SPACE.sub(" ", text).strip().encode())


__all__ = ["state_key"]
