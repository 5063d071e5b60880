"""Env servers started by `eval` itself: one `agentgym-rl env serve NAME` child per env.

Contract: `LocalEnvServers.start(envs, log_dir)` starts one server per env name on free
127.0.0.1 ports (HTTP for health, ZeroMQ for the pool), waits until each answers `/health`
(deadline `ready_timeout_s`), and `addresses()` gives `{env: ["tcp://127.0.0.1:PORT"]}`. A
server that exits or never gets ready raises `EvalError` with its last log lines; `stop()`
(also on leaving the `with` block) terminates each child by PID, then kills it after 10 s.
`serve_env(name, **options)` is one such server for a `with` block, from Python: it yields the
server's addresses (ZeroMQ first, then HTTP).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from agentgym_rl.evaluation.runner import EvalError
from agentgym_rl.ports import free_ports


@dataclass
class _Child:
    env: str
    http_port: int
    zmq_port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]

    def ready(self) -> bool:
        url = f"http://127.0.0.1:{self.http_port}/health"
        try:
            with urllib.request.urlopen(url, timeout=0.5) as r:
                return isinstance(json.loads(r.read()), dict)
        except OSError:
            return False

    def tail(self, lines: int = 15) -> str:
        self.log_file.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def options_for(env_options: Sequence[str], env: str) -> list[str]:
    """The `KEY=VALUE` options of `env`'s servers: a `KEY=VALUE` is every env's, an
    `ENV:KEY=VALUE` ENV's only (a mixed evaluation's), given without its `ENV:`."""
    mine = []
    for option in env_options:
        key, sep, value = option.partition("=")
        target, scoped, name = key.rpartition(":")
        if not scoped:
            mine.append(option)
        elif target == env:
            mine.append(f"{name}{sep}{value}")
    return mine


class LocalEnvServers:
    """Env server children of this process; see the module docstring."""

    def __init__(self, children: list[_Child]) -> None:
        self.children = children

    @classmethod
    def start(
        cls,
        envs: Sequence[str],
        log_dir: Path,
        *,
        ready_timeout_s: float = 120.0,
        env_options: Sequence[str] = (),
    ) -> LocalEnvServers:
        log_dir.mkdir(parents=True, exist_ok=True)
        servers = cls([])
        try:
            for env in envs:
                http_port, zmq_port = free_ports(2)
                log_path = log_dir / f"env-{env}.log"
                log_file = log_path.open("wb")
                cmd = [sys.executable, "-m", "agentgym_rl.cli", "env", "serve", env]
                cmd += ["--port", str(http_port), "--zmq-port", str(zmq_port)]
                options = options_for(env_options, env)
                cmd += [arg for option in options for arg in ("--env-option", option)]
                proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT)
                servers.children.append(_Child(env, http_port, zmq_port, proc, log_path, log_file))
            servers._wait_ready(ready_timeout_s)
        except BaseException:
            servers.stop()
            raise
        return servers

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        waiting = list(self.children)
        while waiting:
            for child in list(waiting):
                if child.proc.poll() is not None:
                    raise EvalError(
                        f"env server {child.env!r} exited with {child.proc.returncode} "
                        f"(log {child.log_path}):\n{child.tail()}"
                    )
                if child.ready():
                    waiting.remove(child)
            if waiting and time.monotonic() > deadline:
                names = [c.env for c in waiting]
                raise EvalError(
                    f"env servers {names} not ready in {timeout_s:.0f} s; see "
                    f"{waiting[0].log_path}, or start them yourself and pass --env-address"
                )
            time.sleep(0.1)  # readiness polling interval

    def addresses(self) -> dict[str, list[str]]:
        return {c.env: [f"tcp://127.0.0.1:{c.zmq_port}"] for c in self.children}

    def http_addresses(self) -> dict[str, list[str]]:
        return {c.env: [f"http://127.0.0.1:{c.http_port}"] for c in self.children}

    def stop(self) -> None:
        for child in self.children:
            if child.proc.poll() is None:
                child.proc.terminate()
        for child in self.children:
            try:
                child.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait(timeout=10)
            child.log_file.close()
        self.children = []

    def __enter__(self) -> LocalEnvServers:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextmanager
def serve_env(
    env: str | type, *, log_dir: str | Path | None = None, **options: object
) -> Iterator[list[str]]:
    """`agentgym-rl env serve ENV` with `options` as its env options (`observation="compact"`)
    while the block runs; yields `[tcp://127.0.0.1:ZMQ, http://127.0.0.1:HTTP]`. `env` is a
    served env's name or an `Environment` subclass of an importable module (the server process
    imports it by reference, `module:Class`). Its log goes to `log_dir` (default: a temporary
    folder)."""
    if isinstance(env, type):
        if env.__module__ == "__main__":
            raise ValueError(
                f"{env.__qualname__} is defined in __main__: put it in an importable module, "
                "which the env server process imports it from"
            )
        env = f"{env.__module__}:{env.__qualname__}"
    flags = [f"{key}={value}" for key, value in options.items()]
    with contextlib.ExitStack() as stack:
        if log_dir is None:
            log_dir = stack.enter_context(tempfile.TemporaryDirectory())
        servers = stack.enter_context(
            LocalEnvServers.start([env], Path(log_dir), env_options=flags)
        )
        yield [*servers.addresses()[env], *servers.http_addresses()[env]]
