"""A supervised child whose supervisor died: stop at once instead of draining.

Contract: `Child.start` names the supervisor in the child's environment (`PARENT_ENV`, its pid),
and the kernel sends the child SIGTERM when the supervisor dies (`die_with_parent`). A child's
stop-signal handler calls `die_if_orphaned()` first: when the named supervisor is gone (no such
process, or a zombie), nobody waits for a drain, a final evaluation or a checkpoint, and the
in-flight work is lost with the run anyway, so the child SIGKILLs its whole process group (itself
and its own children: vLLM engine cores, torchrun workers) within the signal's handling. With no
supervisor named (a process started by hand, or a test in-process) it does nothing.

`end_with_torchrun()`: torchrun starts its workers in sessions of their own, so a worker whose
torchrun was killed would run on; called by a worker, it asks for SIGTERM when torchrun ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from pathlib import Path

PARENT_ENV = "AGENTGYM_RL_SUPERVISOR_PID"
_PR_SET_PDEATHSIG = 1


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def orphaned() -> bool:
    """Whether the supervisor named in the environment has died."""
    named = os.environ.get(PARENT_ENV, "")
    return named.isdigit() and not alive(int(named))


def die_if_orphaned() -> None:
    """SIGKILL this process's group when its supervisor has died (see the module docstring)."""
    if orphaned():
        os.killpg(os.getpgrp(), signal.SIGKILL)


def parent_death_signal(sig: signal.Signals = signal.SIGTERM) -> None:
    """Ask the kernel for `sig` when this process's parent ends (Linux; elsewhere nothing)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig))


def end_with_torchrun() -> None:
    """Under torchrun (`TORCHELASTIC_RUN_ID` set): SIGTERM to this worker when torchrun ends,
    however it ends; at once if it already has."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return
    parent = os.getppid()
    parent_death_signal()
    if os.getppid() != parent or not alive(parent):
        os.kill(os.getpid(), signal.SIGTERM)
