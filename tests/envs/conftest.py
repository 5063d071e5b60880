"""Env-server test fixtures: real server subprocesses on 127.0.0.1 (the installed agentgym_envs).

A server is ready when `GET /health` answers (polled against a deadline); it is ended by PID.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import msgpack
import pytest
import zmq

from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.processes.ports import free_port
from waiting import wait_until


class ServerProc:
    """One env server process (`processes.env_servers.EnvServerProcess`) with HTTP and ZMQ clients."""

    def __init__(self, env: str, http_port: int, *extra: str, python: str = sys.executable) -> None:
        self.env = env
        self.http_port = http_port
        self.server = EnvServerProcess(env, http_port=http_port, python=python).spawn(*extra)
        assert self.server.child is not None and self.server.child.proc is not None
        self.proc = self.server.child.proc
        self.zmq_port = self.server.zmq_port
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{http_port}", timeout=10.0)
        self._ctx = zmq.Context()
        self.dealer = self._ctx.socket(zmq.DEALER)
        self.dealer.setsockopt(zmq.LINGER, 0)
        self.dealer.setsockopt(zmq.RCVTIMEO, 10_000)
        self.dealer.connect(f"tcp://127.0.0.1:{self.zmq_port}")

    def wait_ready(self, deadline_s: float = 120.0) -> ServerProc:
        """Ready within `deadline_s` (a crash fails at once; the deadline is for a loaded CI host:
        the dense retriever's server once took over 30 s there)."""
        self.server.wait_ready(deadline_s)
        return self

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.http.post(path, json=body, **kw).json()

    def get(self, path: str, **params: Any) -> Any:
        return self.http.get(path, params=params).json()

    def zmq(self, request: dict[str, Any] | bytes) -> dict[str, Any]:
        raw = request if isinstance(request, bytes) else msgpack.packb(request)
        self.dealer.send(raw)
        return msgpack.unpackb(self.dealer.recv(), raw=False)

    def live(self) -> int:
        return int(self.get("/health")["live_episodes"])

    def terminate(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def close(self) -> None:
        self.http.close()
        self.dealer.close()
        self._ctx.term()
        self.server.kill()  # its whole group: JVMs and browsers it started go with it


@pytest.fixture
def spawn() -> Iterator[Callable[..., ServerProc]]:
    """`spawn("babyai", "--idle-timeout", "1")` starts a ready server; killed at teardown."""
    started: list[ServerProc] = []

    def start(env: str, *extra: str) -> ServerProc:
        server = ServerProc(env, free_port(), *extra)
        started.append(server)
        return server.wait_ready()

    yield start
    for server in started:
        server.close()


@pytest.fixture(scope="module")
def babyai() -> Iterator[ServerProc]:
    server = ServerProc("babyai", free_port()).wait_ready()
    yield server
    server.close()


@pytest.fixture(scope="module")
def textcraft() -> Iterator[ServerProc]:
    server = ServerProc("textcraft", free_port()).wait_ready()
    yield server
    server.close()


def processes_gone(pids: list[int], deadline_s: float = 15.0) -> bool:
    """Whether every pid in `pids` has exited within `deadline_s` (zombies count as exited)."""
    from agentgym_envs.web.browser import process_alive

    try:
        wait_until(lambda: not any(process_alive(p) for p in pids), deadline_s, "processes gone")
    except AssertionError:
        return False
    return True
