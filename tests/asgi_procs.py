"""An ASGI app module of tests/ served by a real uvicorn process on a free port: ready when
`ready_path` answers (polled with a deadline), ended by PID. Used for the AgentGym reference
stand-in (`agentgym_reference`) and the scripted chat API (`scripted_chat`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from agentgym_rl.processes.ports import free_port
from waiting import wait_until

TESTS_DIR = Path(__file__).resolve().parent


@dataclass
class AsgiProc:
    """`uvicorn --app-dir tests <app>` with extra environment variables."""

    app: str
    env: dict[str, str] = field(default_factory=dict)
    ready_path: str = "/"
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, deadline_s: float = 30.0) -> AsgiProc:
        cmd = [sys.executable, "-m", "uvicorn", "--app-dir", str(TESTS_DIR), self.app]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
        env = {**os.environ, **self.env}
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        wait_until(self._answers, deadline_s, f"{self.app} answering {self.ready_path}")
        return self

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.app} exited with {self.proc.returncode}")
        try:
            with urllib.request.urlopen(self.url + self.ready_path, timeout=0.5):
                return True
        except urllib.error.HTTPError:
            return True  # it answers (an error status is still an answer)
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)

    def get(self, path: str) -> tuple[int, bytes]:
        """`GET path` -> (status, body), error statuses included."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
