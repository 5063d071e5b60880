"""One child process: how it starts (`ChildSpec`, `cli_spec`), its own process group and log
file, when it is ready (`wait_ready`), a stop that escalates.

Contract: a `ChildSpec` is one process as a user would start it (its argv, the same as a shell
line, its host and readiness signal); `cli_spec` makes the spec of an `agentgym-rl ARGS` child,
the one way this package starts its own command line. `Child.start()` launches `spec.argv` in a new session (so a terminal's Ctrl-C reaches
only the supervisor, and the child's own children, vLLM engine cores or torchrun workers, share
its process group), with stdout and stderr appended to `logs/<name>.log`. On Linux the child
also gets SIGTERM if the supervisor dies, and, the supervisor named in its environment, ends at
once with its group rather than draining (`orphans.py`: no orphans even after a SIGKILL of
`train`).
`terminate()` sends SIGTERM to the child only (it then drains or checkpoints and stops its own
children); `kill_group()` sends SIGKILL to the whole group. `stop(grace_s)` does both in order
and always reaps the leftovers of the group. `tail(n)` returns the last lines of the log.
`health_ok(port, host)` is how a server child says it is ready: its `/health` answers 200.
`wait_ready(child, ready, timeout_s)` polls `ready` until it holds, raising `ChildExited` when
the child exits first and `NotReady` past the deadline (None: no deadline; `tick` runs each
poll, for progress).
`Launched` is what the supervisor needs of a child, whoever starts it: `Child` here, a child
started through `srun` or by a Ray actor on another node (`agentgym_rl.cluster`).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from agentgym_rl.processes.orphans import PARENT_ENV, parent_death_signal

POLL_S = 0.1
"""How often readiness is polled."""

Role = Literal["init", "env", "learn", "rollout", "judge"]


@dataclass(frozen=True)
class ChildSpec:
    """How to start one child process and when it is ready."""

    name: str
    role: Role
    argv: list[str]
    shell: str
    """The same command as a user types it (the split-cluster recipe in configs/commands.sh)."""
    health_port: int | None = None
    """HTTP port whose /health answers once the child is ready."""
    listen_ports: tuple[int, ...] = ()
    """TCP ports the child binds once ready."""
    host: str = "127.0.0.1"
    """Where it runs (its first host when it spans several)."""
    address: str = ""
    """Where it is reached, when not at `host` (a SLURM node's NodeAddr)."""
    hosts: tuple[str, ...] = ()
    """Every host it runs on, one task each (the learner's nodes; empty: `host` alone)."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment it needs besides the run's (a rollout server's CUDA_VISIBLE_DEVICES)."""


def cli_argv(*args: str) -> list[str]:
    """`agentgym-rl ARGS` as this Python runs it."""
    return [sys.executable, "-m", "agentgym_rl.cli", *args]


def cli_spec(name: str, role: Role, *args: str, **fields: object) -> ChildSpec:
    """The spec of an `agentgym-rl ARGS` child (`fields`: `ChildSpec`'s others)."""
    shell = shlex.join(["agentgym-rl", *args])
    return ChildSpec(name, role, cli_argv(*args), shell, **fields)  # type: ignore[arg-type]


class ChildExited(RuntimeError):
    """A child exited before it was ready."""

    def __init__(self, name: str, code: int) -> None:
        super().__init__(f"{name} exited with code {code} before it was ready")
        self.code = code


class NotReady(TimeoutError):
    """A child was not ready by its deadline."""


def die_with_parent() -> None:
    """Runs in the child before exec (`preexec_fn`): ask the kernel for SIGTERM when the
    supervisor exits."""
    parent_death_signal(signal.SIGTERM)


def health_ok(port: int, host: str = "127.0.0.1") -> bool:
    """True when `http://host:port/health` answers 200 within a second (a port that answers
    but not in HTTP, such as a ZeroMQ socket's greeting, is not ready either)."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=1.0) as r:
            return bool(r.status == 200)
    except (OSError, http.client.HTTPException):
        return False


def wait_ready(
    child: Launched,
    ready: Callable[[], bool],
    timeout_s: float | None,
    tick: Callable[[], None] | None = None,
) -> None:
    """Poll `ready` until it holds (see the module docstring)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not ready():
        if tick is not None:
            tick()
        code = child.poll()
        if code is not None:
            if code == 0 and ready():  # a finite job (model creation) is ready when it exits
                return
            raise ChildExited(child.name, code)
        if deadline is not None and time.monotonic() > deadline:
            raise NotReady(f"{child.name} not ready after {timeout_s:.0f} s")
        time.sleep(POLL_S)


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
            env = {**(self.env or os.environ), **self.spec.env, PARENT_ENV: str(os.getpid())}
            self.proc = subprocess.Popen(
                self.spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
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
