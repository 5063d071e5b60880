"""One supervised child: its own process group, its own log file, a stop that escalates.

Contract: `Child.start()` launches `spec.argv` in a new session (so a terminal's Ctrl-C reaches
only the supervisor, and the child's own children, vLLM engine cores or torchrun workers, share
its process group), with stdout and stderr appended to `logs/<name>.log`. On Linux the child
also gets SIGTERM if the supervisor dies (no orphans even after a SIGKILL of `train`).
`terminate()` sends SIGTERM to the child only (it then drains or checkpoints and stops its own
children); `kill_group()` sends SIGKILL to the whole group. `stop(grace_s)` does both in order
and always reaps the leftovers of the group. `tail(n)` returns the last lines of the log.
`health_ok(port, host)` is how a server child says it is ready: its `/health` answers 200.
`Launched` is what the supervisor needs of a child, whoever starts it: `Child` here, a child
started through `srun` or by a Ray actor on another node (`agentgym_rl.cluster`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import deque
from pathlib import Path
from typing import Protocol

from agentgym_rl.supervise.children import ChildSpec

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Runs in the child before exec (`preexec_fn`): ask the kernel for SIGTERM when the
    supervisor exits."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def health_ok(port: int, host: str = "127.0.0.1") -> bool:
    """True when `http://host:port/health` answers 200 within a second."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=1.0) as r:
            return bool(r.status == 200)
    except OSError:
        return False


class Launched(Protocol):
    """A supervised child as the supervisor sees it."""

    spec: ChildSpec
    log_path: Path
    restarts: int

    @property
    def name(self) -> str: ...
    @property
    def pid(self) -> int | None: ...
    def start(self) -> Launched: ...
    def poll(self) -> int | None: ...
    def running(self) -> bool: ...
    def terminate(self) -> None: ...
    def kill_group(self) -> None: ...
    def wait(self, timeout_s: float) -> int | None: ...
    def tail(self, lines: int = 30) -> list[str]: ...


class Child:
    """A supervised child process (started at most once per `start()` call; restartable)."""

    def __init__(self, spec: ChildSpec, log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.spec = spec
        self.log_path = log_dir / f"{spec.name}.log"
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.started_at = 0.0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def start(self) -> Child:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            log.write(f"=== {stamp} start: {self.spec.shell}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**(self.env or os.environ), **self.spec.env} if self.spec.env else self.env,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
        self.started_at = time.monotonic()
        return self

    def poll(self) -> int | None:
        """The exit code once the child has exited (None while it runs or before start)."""
        return None if self.proc is None else self.proc.poll()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> None:
        """SIGTERM to the child itself (not its group: it stops its own children in order)."""
        if self.running():
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)

    def kill_group(self) -> None:
        """SIGKILL to every process left in the child's group."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def wait(self, timeout_s: float) -> int | None:
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=max(timeout_s, 0.0))
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float) -> int | None:
        """SIGTERM, wait up to `grace_s`, SIGKILL the group if needed; returns the exit code."""
        self.terminate()
        code = self.wait(grace_s)
        if code is None:
            self.kill_group()
            code = self.wait(10.0)
        self.kill_group()  # grandchildren that outlived their parent
        return code

    def tail(self, lines: int = 30) -> list[str]:
        """The last `lines` lines of the child's log."""
        return log_tail(self.log_path, lines)


def log_tail(path: Path, lines: int = 30) -> list[str]:
    """The last `lines` lines of a log file (none when it cannot be read)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 256 * 1024))  # enough for 30 lines of any log
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    return list(deque(text.splitlines(), maxlen=lines))
