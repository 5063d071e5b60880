"""Rollout test harness: env server subprocesses (ended by PID), the scripted `Engine`
(tests/scripted_engine.py), and a helper to receive groups from a real `GroupReceiver`."""

from __future__ import annotations

import time

from agentgym_rl import _core
from agentgym_rl.processes.env_servers import EnvServerProcess
from scripted_engine import CHATML, ScriptedEngine, babyai_policy, check_sample_arrays

__all__ = [
    "CHATML",
    "FAST_SENDER",
    "EnvServerProcess",
    "ScriptedEngine",
    "babyai_policy",
    "check_sample_arrays",
    "receive_groups",
]

FAST_SENDER = {"heartbeat_s": 0.05, "peer_timeout_s": 0.5, "handshake_timeout_s": 0.5}


def receive_groups(
    receiver: _core.GroupReceiver, count: int, timeout_s: float = 30.0
) -> list[_core.Group]:
    """Receive `count` groups (decoded), failing after `timeout_s`."""
    groups: list[_core.Group] = []
    deadline = time.monotonic() + timeout_s
    while len(groups) < count:
        assert time.monotonic() < deadline, f"received {len(groups)} of {count} groups"
        got = receiver.recv(timeout_s=0.2)
        if got is not None:
            groups.append(_core.decode_group(got[1]))
    return groups
