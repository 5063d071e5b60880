"""Faults the pool must survive: garbage and slow replies from a tiny fake HTTP server (the
one place a fake is used: real env servers do not misbehave on demand), and resource leaks
over 1,000 concurrent and 10,000 sequential episodes against a real server."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentgym_rl import _core as core

from .test_pool import run


class _Misbehaving(BaseHTTPRequestHandler):
    """AgentGym-shaped endpoints; the step action picks the fault."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/observation"):
            self._reply(200, b"<html>not json</html>")
        else:
            self._reply(200, b'{"status": "ok"}')

    def do_POST(self) -> None:
        fields = json.loads(self.rfile.read(int(self.headers["content-length"])) or b"{}")
        if self.path == "/create":
            self._reply(200, b'{"id": 1}')
        elif self.path == "/reset":
            time.sleep(float(fields.get("data_idx", 0)) / 1000)
            self._reply(200, b'{"observation": "start", "reward": 0, "done": false}')
        elif self.path == "/step":
            action = fields.get("action")
            if action == "garbage":
                self._reply(200, b"\x00\xffnot json at all")
            elif action == "wrong_shape":
                self._reply(200, b'{"reward": "lots"}')
            elif action == "crash":
                self._reply(500, b"Internal Server Error")
            elif action == "slow":
                time.sleep(5.0)
                self._reply(200, b'{"observation": "late", "reward": 0, "done": false}')
            else:
                self._reply(200, b'{"observation": "ok", "reward": 0, "done": false}')
        else:
            self._reply(200, b'{"closed": true}')


@pytest.fixture
def fake_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Misbehaving)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_malformed_and_slow_replies_are_typed_errors(fake_server):
    async def main():
        pool = core.EnvPool(
            [core.EnvServer("fake", fake_server)],
            step_timeout_s=1.0,  # a loaded machine's prompt replies fit; the slow ones do not
            reset_timeout_s=1.0,
            retries=1,
            retry_delay_s=0.01,
        )

        async def episode() -> int:
            e = (await pool.create("fake")).episode
            await pool.reset(e, 0)
            return e

        for action in ("garbage", "wrong_shape", "crash", "slow"):
            e = await episode()
            started = time.monotonic()
            with pytest.raises(core.EnvFailureError):
                await pool.step(e, action)
            assert time.monotonic() - started < 4.0  # the slow step would take 5 s
            with pytest.raises(core.UnknownEpisodeError):  # the failure ended the episode
                await pool.step(e, "noop")
        e = await episode()
        with pytest.raises(core.MalformedReplyError):
            await pool.observation(e)
        started = time.monotonic()
        with pytest.raises(core.EnvTimeoutError):  # slow reset: retried once, then a timeout
            await pool.reset(e, 5000)
        assert time.monotonic() - started < 4.0  # two tries of 1 s, not the 5 s reset
        results = await pool.step_many([(e, "garbage"), (await episode(), "noop")])
        assert isinstance(results[0], core.EnvFailureError)
        assert isinstance(results[1], core.StepOutcome)
        await pool.shutdown()

    run(main(), timeout=30)


def _fds() -> int:
    return _open_fds("self")


def _open_fds(pid: int | str) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _episode(pool: core.EnvPool, steps: int = 2) -> None:
    e = (await pool.create("noop")).episode
    await pool.reset(e, 0)
    for _ in range(steps):
        await pool.step(e, "noop")
    await pool.close(e)


def _leak_check(server, transport: str, concurrent: int, sequential: int) -> None:
    addr = server.http if transport == "http" else server.zmq

    async def main():
        pool = core.EnvPool([core.EnvServer("noop", addr, max_inflight=128)])
        await asyncio.gather(*(_episode(pool) for _ in range(concurrent)))
        # Baselines after the first wave: connections and allocator arenas exist by now.
        fds, rss = _fds(), _rss()
        server_fds, server_rss = _open_fds(server.pid), server.health()["rss_bytes"]
        await asyncio.gather(*(_episode(pool) for _ in range(concurrent)))
        for _ in range(sequential):
            await _episode(pool, steps=1)
        assert pool.live_episodes == 0
        health = server.health()
        assert health["live_episodes"] == 0
        assert _fds() - fds <= 4, (fds, _fds())
        assert _rss() - rss <= 32 << 20, (rss, _rss())
        assert _open_fds(server.pid) - server_fds <= 4
        assert health["rss_bytes"] - server_rss <= 32 << 20
        await pool.shutdown()

    run(main(), timeout=300)


@pytest.mark.parametrize("transport", ["zmq", "http"])
def test_no_leaks_1000_concurrent_then_sequential(noop_server, transport):
    _leak_check(noop_server, transport, 1000, 10_000)
