"""Env servers started by this process (`eval`, the Python API's `serve_env`, tests and
benches): one env server child per env.

Contract: `EnvServerProcess(env)` is one server on free 127.0.0.1 ports (HTTP for health and the
AgentGym protocol, ZeroMQ for the pool), a `processes.child.Child` logging to
`log_dir/env-<name>.log` (default: a temporary folder). `spawn(*extra)` starts it (`extra`: more
server flags, e.g. `--step-latency-ms 40`), `wait_ready(timeout_s)` waits until `/health`
answers; a server that exits first or never gets ready raises `EnvServerError` with its last log
lines. `start` is both. `stop()` terminates it (its process group killed after a grace), `kill()`
is SIGKILL at once (fault tests), `health()` is its `/health` document. By default it runs as
`agentgym-rl env serve ENV`; `python=` runs `PYTHON -m agentgym_envs.server ENV` instead (an
interpreter of another virtualenv, where agentgym-rl need not be installed); `name` names its
child and log, `environ` is the child's whole environment, `ports` the book its ports are
taken from (one book for several servers keeps them all distinct).
`LocalEnvServers.start(envs, log_dir)` starts one server per env name and waits for all;
`addresses()` gives `{env: ["tcp://127.0.0.1:PORT"]}`; `stop()` (also on leaving the `with`
block) stops every one. `serve_env(name, **options)` is one such server for a `with` block, from
Python: it yields the server's addresses (ZeroMQ first, then HTTP).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

from agentgym_rl.processes.child import (
    Child,
    ChildExited,
    ChildSpec,
    NotReady,
    cli_argv,
    health_ok,
    wait_ready,
)
from agentgym_rl.processes.ports import PortBook

STOP_GRACE_S = 10.0


class EnvServerError(RuntimeError):
    """An env server this process started exited or never got ready."""


class EnvServerProcess:
    """One env server child; see the module docstring."""

    def __init__(
        self,
        env: str,
        log_dir: Path | None = None,
        *,
        http_port: int | None = None,
        python: str | None = None,
        name: str | None = None,
        environ: dict[str, str] | None = None,
        ports: PortBook | None = None,
    ) -> None:
        self.env = env
        self.name = name or f"env-{env}"
        """Its child's name, and so its log's (`<name>.log`)."""
        self.environ = environ
        """The child's whole environment (None: this process's)."""
        book = ports if ports is not None else PortBook()
        if http_port:
            book.used.add(http_port)  # the ZeroMQ port is another
        self.http_port = http_port or book.free()
        self.zmq_port = book.free()
        self.python = python
        self.log_dir = log_dir
        self._own_log_dir = log_dir is None  # a temporary folder, removed when it stops
        self.child: Child | None = None

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def zmq(self) -> str:
        return f"tcp://127.0.0.1:{self.zmq_port}"

    @property
    def pid(self) -> int:
        assert self.child is not None and self.child.pid is not None, "spawn first"
        return self.child.pid

    def spawn(self, *extra: str) -> EnvServerProcess:
        ports = ["--port", str(self.http_port), "--zmq-port", str(self.zmq_port), *extra]
        shell = shlex.join(["agentgym-rl", "env", "serve", self.env, *ports])
        if self.python is not None:
            argv = [self.python, "-m", "agentgym_envs.server", self.env, *ports]
        else:
            argv = cli_argv("env", "serve", self.env, *ports)
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix="agentgym-env-"))
        spec = ChildSpec(self.name, "env", argv, shell, health_port=self.http_port)
        self.child = Child(spec, self.log_dir, self.environ).start()
        return self

    def wait_ready(self, timeout_s: float = 120.0) -> EnvServerProcess:
        child = self.child
        assert child is not None, "spawn first"
        try:
            wait_ready(child, partial(health_ok, self.http_port), timeout_s)
        except ChildExited as e:
            raise EnvServerError(
                f"env server {self.env!r} exited with {e.code} (log {child.log_path}):\n"
                + "\n".join(child.tail(15))
            ) from None
        except NotReady:
            raise EnvServerError(
                f"env server {self.env!r} not ready in {timeout_s:.0f} s; see "
                f"{child.log_path}, or start it yourself and pass --env-address"
            ) from None
        return self

    def start(self, *extra: str, timeout_s: float = 120.0) -> EnvServerProcess:
        try:
            return self.spawn(*extra).wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise

    def running(self) -> bool:
        return self.child is not None and self.child.running()

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM, then SIGKILL to its group after `grace_s`; its exit code."""
        code = None if self.child is None else self.child.stop(grace_s)
        self._forget_logs()
        return code

    def kill(self) -> None:
        """SIGKILL to its group now (a crash, for fault tests)."""
        if self.child is not None:
            self.child.kill_group()
            self.child.wait(10.0)
        self._forget_logs()

    def _forget_logs(self) -> None:
        if self._own_log_dir and self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def health(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """Its `/health` document (live episodes, memory, ...)."""
        with urllib.request.urlopen(f"{self.http}/health", timeout=timeout_s) as r:
            return dict(json.loads(r.read()))


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
    """Env server children of this process, one per env; see the module docstring."""

    def __init__(self, children: list[EnvServerProcess]) -> None:
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
        servers, ports = cls([]), PortBook()
        try:
            for env in envs:
                options = [a for o in options_for(env_options, env) for a in ("--env-option", o)]
                server = EnvServerProcess(env, log_dir, ports=ports)
                servers.children.append(server.spawn(*options))
            for server in servers.children:
                server.wait_ready(ready_timeout_s)
        except BaseException:
            servers.stop()
            raise
        return servers

    def addresses(self) -> dict[str, list[str]]:
        return {c.env: [c.zmq] for c in self.children}

    def http_addresses(self) -> dict[str, list[str]]:
        return {c.env: [c.http] for c in self.children}

    def stop(self) -> None:
        for server in self.children:
            if server.child is not None:
                server.child.terminate()  # all at once, then wait for each
        for server in self.children:
            server.stop()
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
