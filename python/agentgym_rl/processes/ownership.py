"""Every process a command starts ends with it, however the command ends.

Contract: `own_descendants()`, called by a command before it starts any process, adds this
process's mark (pid and start time) to `OWNER_ENV` in its environment, which every process
started afterwards inherits whoever starts it (our children, vLLM's engine core and its
workers, torchrun's workers, JVMs, browsers), and starts `watchdog.py` in a session of its own
with the mark removed from its environment. When the command ends, by returning, by an
exception or by any signal, SIGKILL included, the watchdog stops every process still carrying
the mark: SIGTERM, `grace_s` to go, SIGKILL. Marks accumulate down a tree (`train`'s children
carry its mark and their own), so any ancestor's watchdog reaches every descendant. Calling it
again in the same process is a no-op. Linux only (elsewhere it returns None and does nothing).

A process that must outlive its command removes the variable from its environment; none does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from agentgym_rl.processes.watchdog import OWNER_ENV, marked

GRACE_S = 5.0
"""How long the watchdog lets SIGTERMed leftovers stop before SIGKILL."""


@dataclass(frozen=True)
class Owner:
    """This process as an owner: its mark and its watchdog."""

    mark: str
    watchdog: subprocess.Popen[bytes]

    def leftovers(self) -> list[int]:
        """The pids of running processes that carry this mark (this one excluded)."""
        return [pid for pid in marked(self.mark) if pid != os.getpid()]


_OWNER: Owner | None = None


def _start_time(pid: int) -> str:
    """The kernel's start time of `pid` (clock ticks since boot): with the pid, unique."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[19]


def own_descendants(grace_s: float = GRACE_S) -> Owner | None:
    """Mark this process's future descendants and start their watchdog (module docstring)."""
    global _OWNER
    if _OWNER is not None or not sys.platform.startswith("linux"):
        return _OWNER
    pid = os.getpid()
    mark = f"{pid}.{_start_time(pid)}"
    owners = [m for m in os.environ.get(OWNER_ENV, "").split(",") if m]
    watchdog_env = {k: v for k, v in os.environ.items() if k != OWNER_ENV}
    script = Path(__file__).with_name("watchdog.py")
    watchdog = subprocess.Popen(
        [sys.executable, "-I", str(script), str(pid), mark, str(grace_s)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a group kill of the command does not reach it
        env=watchdog_env,
    )
    os.environ[OWNER_ENV] = ",".join([*owners, mark])
    _OWNER = Owner(mark, watchdog)
    return _OWNER


__all__ = ["GRACE_S", "OWNER_ENV", "Owner", "own_descendants"]
