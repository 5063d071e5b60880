"""Runs one env server process: HTTP (uvicorn) and ZeroMQ front ends plus the idle reaper on one
asyncio loop, sharing one `EpisodeTable`. SIGTERM/SIGINT close every episode and exit 0. A
watchdog thread (the loop itself may be the one an env call blocks) ends the process with
`HUNG_EXIT` when one env call runs past `call_timeout_s`: nothing else gets served while it
hangs, and a supervisor restarts a server that exited."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import uvicorn

from agentgym_envs.catalog import EnvLoadError, load_env
from agentgym_envs.server.base import EnvUnavailable
from agentgym_envs.server.http import HttpApp
from agentgym_envs.server.latency import StepLatency
from agentgym_envs.server.table import EpisodeTable

log = logging.getLogger("agentgym_envs.server")

HUNG_EXIT = 75
"""The exit code of a server whose env hung (EX_TEMPFAIL: try again, i.e. restart it)."""


@dataclass(frozen=True)
class ServeOptions:
    """Everything `serve` needs; see options.py for the meaning of each field."""

    name: str
    host: str = "127.0.0.1"
    port: int = 36001
    zmq_port: int | None = None
    idle_timeout_s: float = 600.0
    call_timeout_s: float = 300.0
    max_obs_chars: int = 16_000
    log_level: str = "warning"
    step_latency_ms: float = 0.0
    step_latency_sigma: float = 1.0
    env_options: dict[str, str] = field(default_factory=dict)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the process-level handler below owns shutdown
    (uvicorn's re-raises the signal after exit, which would end the process with status -15)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _reaper(table: EpisodeTable) -> None:
    assert table.idle_timeout_s is not None
    period = min(5.0, max(0.05, table.idle_timeout_s / 4))
    while True:
        await asyncio.sleep(period)
        await table.run(table.reap_idle)


def _watch_calls(table: EpisodeTable, limit_s: float) -> None:
    """Exit the process once an env call has run past `limit_s` (see the module docstring)."""

    def watch() -> None:
        while True:
            time.sleep(min(1.0, limit_s / 4))
            hung = table.hung_for()
            if hung > limit_s:
                log.critical(
                    "an env call has run %.0f s, over --call-timeout %.0f s: the env hangs; "
                    "exiting (code %d) so that this server can be restarted",
                    hung,
                    limit_s,
                    HUNG_EXIT,
                )
                logging.shutdown()
                os._exit(HUNG_EXIT)

    threading.Thread(target=watch, name="call-watchdog", daemon=True).start()


async def _main(opts: ServeOptions) -> int:
    try:
        env = load_env(opts.name, **opts.env_options)
    except EnvUnavailable as exc:
        log.error("cannot serve %s: %s", opts.name, exc)
        return 1
    except (EnvLoadError, ValueError) as exc:  # unknown or broken env, a bad option: say which
        log.error("cannot serve %s: %s", opts.name, exc)
        return 2
    table = EpisodeTable(env, idle_timeout_s=opts.idle_timeout_s, max_obs_chars=opts.max_obs_chars)
    if opts.call_timeout_s > 0:
        _watch_calls(table, opts.call_timeout_s)
    latency = (
        StepLatency(opts.step_latency_ms, opts.step_latency_sigma)
        if opts.step_latency_ms > 0
        else None
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    config = uvicorn.Config(
        HttpApp(table, latency),
        host=opts.host,
        port=opts.port,
        lifespan="off",
        access_log=False,
        log_level=opts.log_level,
        # longer than any client keeps an idle connection (httpx: 5 s), so a client never sends
        # on a connection the server is closing: at 5 s, agents whose turn took ~5 s lost calls
        # (ReadError) and then their episodes in the agent soak
        timeout_keep_alive=65,
    )
    server = _Server(config)
    tasks = [asyncio.create_task(server.serve(), name="http")]
    zmq_front = None
    if opts.zmq_port is not None:
        from agentgym_envs.server.zmq_server import ZmqFrontend

        zmq_front = ZmqFrontend(table, opts.host, opts.zmq_port, latency)
        tasks.append(asyncio.create_task(zmq_front.run(), name="zmq"))
    if table.idle_timeout_s is not None:
        tasks.append(asyncio.create_task(_reaper(table), name="reaper"))
    stopper = asyncio.create_task(stop.wait(), name="stop")

    done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if stopper not in done:  # a front end ended on its own: startup failure (port in use, ...)
        code = 1
        for task in done:
            if task.exception() is not None:
                log.error("%s failed: %r", task.get_name(), task.exception())
    server.should_exit = True
    for task in tasks[1:]:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    stopper.cancel()
    if zmq_front is not None:
        zmq_front.close()
    live = len(table)
    table.shutdown()
    log.info("shut down; closed %d live episode(s)", live)
    return code


def serve(opts: ServeOptions) -> int:
    """Serve `opts.name` until SIGTERM/SIGINT. Returns 0 on a clean shutdown, 1 on startup errors."""
    logging.basicConfig(
        level=opts.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    try:
        import uvloop

        return uvloop.run(_main(opts))
    except ImportError:
        return asyncio.run(_main(opts))
