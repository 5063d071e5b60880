"""Env server subprocesses for tests, the one wrapper: `python -m agentgym_envs.server` on free
ports, ready when /health answers (polled with a deadline), ended by PID. Shared by the
envpool, rollout and env tests (`spawn_server` in tests/conftest.py; `tests/envs/conftest.py`
adds HTTP and ZeroMQ clients on top)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from agentgym_rl.processes.ports import free_port


def health(http_port: int, timeout: float = 1.0) -> dict[str, Any]:
    url = f"http://127.0.0.1:{http_port}/health"
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return dict(json.loads(r.read()))


@dataclass
class EnvServerProc:
    """One env server process serving HTTP on `http_port` and ZeroMQ on `zmq_port`."""

    env: str
    http_port: int = field(default_factory=free_port)
    zmq_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    python: str = sys.executable
    """The interpreter that runs the server (a plugin test's own virtualenv)."""

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def zmq(self) -> str:
        return f"tcp://127.0.0.1:{self.zmq_port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, *extra: str, deadline_s: float = 30.0) -> EnvServerProc:
        """Spawn the server and wait until it is ready."""
        return self.spawn(*extra).wait_ready(deadline_s)

    def spawn(self, *extra: str) -> EnvServerProc:
        cmd = [self.python, "-m", "agentgym_envs.server", self.env]
        cmd += ["--port", str(self.http_port), "--zmq-port", str(self.zmq_port), *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        return self

    def wait_ready(self, deadline_s: float = 30.0) -> EnvServerProc:
        assert self.proc is not None, "spawn first"
        deadline = time.monotonic() + deadline_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.env} server exited with {self.proc.returncode}")
            try:
                health(self.http_port, timeout=0.5)
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.env} server not ready in {deadline_s} s") from None
                time.sleep(0.05)  # polling interval of the readiness probe, not a sync point

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def health(self) -> dict[str, Any]:
        return health(self.http_port)

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))
