"""Relay side of a rollout server's weight subscriber: forward verified chunks to its children.

Contract. `Fanout.start(version, children, stall_s)` takes this server's subtree of the relay
tree (from the `route` message, see `schema.py`) and sends each child its own `route`;
`forward(frames)` queues one verified chunk message (the received frames, re-sent zero-copy and
byte for byte) to every child still taking chunks; `pump()` moves the queues along and returns
the children that stalled: chunks outstanding and no `credit` for `stall_s` (dead, or too slow).
A stalled child is dropped for this version and reported by the caller to the learner
(`relay_failed`), which then sends that child the update itself. A newer `start` drops what is
left of the previous version. Nothing here blocks: each child has a DEALER (connected to the
child's relay endpoint, cached across versions) with a small send high-water mark, sent to
without waiting; a full pipe keeps the message in that child's queue for the next `pump`.

The queues hold references to received frames (one update at most per child: a relay never
holds more than the update it is assembling anyway).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import zmq

from agentgym_rl.auth import RefusalLog
from agentgym_rl.weights import schema
from agentgym_rl.weights.signing import Signer, Unauthenticated

log = logging.getLogger(__name__)


class _Child:
    def __init__(self, server_id: str, endpoint: str, sock: zmq.Socket[bytes]) -> None:
        self.server_id = server_id
        self.endpoint = endpoint
        self.sock = sock
        self.queue: deque[Sequence[Any]] = deque()
        self.chunks_sent = 0
        self.credited = 0
        self.last_progress = time.monotonic()
        self.failed = False


class Fanout:
    """The children this server relays one version to."""

    def __init__(self, sender_id: str, *, sndhwm: int = 4, signer: Signer | None = None) -> None:
        self.sender_id = sender_id
        self.signer = signer or Signer(None)
        self.refusals = RefusalLog(f"weights (relay {sender_id})")
        self.sndhwm = sndhwm
        self.version: int | None = None
        self.stall_s = 5.0
        self.children: list[_Child] = []
        self.chunks_forwarded = 0
        self.bytes_forwarded = 0
        """Data bytes queued to children (this server's relay egress), all versions."""
        self._socks: dict[str, zmq.Socket[bytes]] = {}
        self._ctx: zmq.Context[Any] = zmq.Context.instance()

    @property
    def busy(self) -> bool:
        """Something queued, or chunks awaiting credit."""
        return any(not c.failed and (c.queue or c.credited < c.chunks_sent) for c in self.children)

    def _sock(self, endpoint: str) -> zmq.Socket[bytes]:
        sock = self._socks.get(endpoint)
        if sock is None:
            sock = self._ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SNDHWM, self.sndhwm)
            sock.setsockopt(zmq.IDENTITY, self.sender_id.encode())
            sock.connect(endpoint)
            self._socks[endpoint] = sock
        return sock

    def start(self, version: int, children: list[Any], stall_s: float) -> None:
        """Relay `version` to `children` (`[server_id, endpoint, subtree]` each)."""
        self.version, self.stall_s = version, stall_s
        self.children = []
        for entry in children:
            server_id, endpoint, subtree = str(entry[0]), str(entry[1]), list(entry[2])
            child = _Child(server_id, endpoint, self._sock(endpoint))
            route = {"kind": "route", "version": version, "stall_s": stall_s}
            child.queue.append(self.signer.pack({**route, "children": subtree}))
            self.children.append(child)
        wanted = {c.endpoint for c in self.children}
        for endpoint in [e for e in self._socks if e not in wanted]:
            self._socks.pop(endpoint).close(linger=0)  # no longer a child of this server
        for sock in self._socks.values():  # credits of an older version
            while sock.poll(0, zmq.POLLIN):
                sock.recv_multipart()

    def stop(self) -> None:
        """Forward nothing more of the current version (it was rejected here)."""
        self.children = []

    def forward(self, frames: Sequence[Any]) -> None:
        now = time.monotonic()
        taking = [c for c in self.children if not c.failed]
        for child in taking:
            if not child.queue and child.credited >= child.chunks_sent:
                child.last_progress = now  # it was waiting on us, not we on it
            child.queue.append(frames)
            child.chunks_sent += 1
        if taking:
            self.chunks_forwarded += len(taking)
            self.bytes_forwarded += self.signer.data_bytes(frames) * len(taking)

    def pump(self, now: float | None = None) -> list[str]:
        """Send what the pipes take, read credits; returns children that stalled just now."""
        now = time.monotonic() if now is None else now
        stalled = []
        for child in self.children:
            if child.failed:
                continue
            self._read_credits(child, now)
            while child.queue:
                try:
                    child.sock.send_multipart(child.queue[0], flags=zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                child.queue.popleft()
            outstanding = child.queue or child.credited < child.chunks_sent
            if outstanding and now - child.last_progress > self.stall_s:
                child.failed = True
                child.queue.clear()
                stalled.append(child.server_id)
                log.warning(
                    "weights: relay child %s stalled at chunk %d/%d of version %s",
                    child.server_id,
                    child.credited,
                    child.chunks_sent,
                    self.version,
                )
        return stalled

    def _read_credits(self, child: _Child, now: float) -> None:
        while child.sock.poll(0, zmq.POLLIN):
            try:
                header, _ = schema.unpack(self.signer.open(child.sock.recv_multipart()))
            except Unauthenticated as exc:
                self.refusals.note(child.endpoint, str(exc))
                continue
            except schema.MalformedMessage:
                continue
            if header.get("kind") == "credit" and header.get("version") == self.version:
                child.credited = max(child.credited, int(header.get("index", -1)) + 1)
                child.last_progress = now

    def close(self) -> None:
        for sock in self._socks.values():
            sock.close(linger=0)
        self._socks.clear()
        self.children = []
