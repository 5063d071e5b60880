"""Helpers for transport tests: endpoints, fast heartbeat settings, threads with bounded joins."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

FAST = {"heartbeat_s": 0.05, "peer_timeout_s": 0.5, "handshake_timeout_s": 0.5}
WAIT = 10.0


@pytest.fixture(params=["tcp", "ipc"])
def endpoint(request: pytest.FixtureRequest, free_port: int, tmp_path: Path) -> str:
    if request.param == "tcp":
        return f"tcp://127.0.0.1:{free_port}"
    return f"ipc://{tmp_path / 'stream.sock'}"


class Worker(threading.Thread):
    """A thread that records its exception; ``result()`` joins with a bound and re-raises."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self._fn, self.error, self.value = fn, None, None
        self.start()

    def run(self) -> None:
        try:
            self.value = self._fn()
        except BaseException as e:
            self.error = e

    def result(self, timeout: float = WAIT) -> Any:
        self.join(timeout)
        assert not self.is_alive(), "worker did not finish in time"
        if self.error is not None:
            raise self.error
        return self.value


def payload(tag: str, i: int) -> bytes:
    return (f"{tag}:{i}:" * (1 + i % 7)).encode()
