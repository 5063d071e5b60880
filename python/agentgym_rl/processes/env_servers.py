"""Env servers started by this process (`eval`, the Python API's `serve_env`): one
`agentgym-rl env serve NAME` child per env.

Contract: `LocalEnvServers.start(envs, log_dir)` starts one server per env name on free
127.0.0.1 ports (HTTP for health, ZeroMQ for the pool) as `processes.child.Child`ren (log
`log_dir/env-<name>.log`), waits until each answers `/health` (deadline `ready_timeout_s`), and
`addresses()` gives `{env: ["tcp://127.0.0.1:PORT"]}`. A server that exits or never gets ready
raises `EnvServerError` with its last log lines; `stop()` (also on leaving the `with` block)
terminates every child, then kills what is left of its process group after 10 s.
`serve_env(name, **options)` is one such server for a `with` block, from Python: it yields the
server's addresses (ZeroMQ first, then HTTP).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType

from agentgym_rl.processes.child import (
    Child,
    ChildExited,
    NotReady,
    cli_spec,
    health_ok,
    wait_ready,
)
from agentgym_rl.processes.ports import free_ports

STOP_GRACE_S = 10.0


class EnvServerError(RuntimeError):
    """An env server this process started exited or never got ready."""


@dataclass
class _Server:
    env: str
    http_port: int
    zmq_port: int
    child: Child


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

    def __init__(self, children: list[_Server]) -> None:
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
        servers = cls([])
        try:
            for env in envs:
                http_port, zmq_port = free_ports(2)
                args = ["env", "serve", env, "--port", str(http_port), "--zmq-port", str(zmq_port)]
                args += [
                    a for option in options_for(env_options, env) for a in ("--env-option", option)
                ]
                spec = cli_spec(f"env-{env}", "env", *args, health_port=http_port)
                child = Child(spec, log_dir).start()
                servers.children.append(_Server(env, http_port, zmq_port, child))
            for server in servers.children:
                servers._wait_ready(server, ready_timeout_s)
        except BaseException:
            servers.stop()
            raise
        return servers

    @staticmethod
    def _wait_ready(server: _Server, timeout_s: float) -> None:
        child = server.child
        try:
            wait_ready(child, partial(health_ok, server.http_port), timeout_s)
        except ChildExited as e:
            raise EnvServerError(
                f"env server {server.env!r} exited with {e.code} (log {child.log_path}):\n"
                + "\n".join(child.tail(15))
            ) from None
        except NotReady:
            raise EnvServerError(
                f"env server {server.env!r} not ready in {timeout_s:.0f} s; see "
                f"{child.log_path}, or start it yourself and pass --env-address"
            ) from None

    def addresses(self) -> dict[str, list[str]]:
        return {c.env: [f"tcp://127.0.0.1:{c.zmq_port}"] for c in self.children}

    def http_addresses(self) -> dict[str, list[str]]:
        return {c.env: [f"http://127.0.0.1:{c.http_port}"] for c in self.children}

    def stop(self) -> None:
        for server in self.children:
            server.child.terminate()
        for server in self.children:
            server.child.stop(STOP_GRACE_S)
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
