"""Learner side of the weight stream: a ZeroMQ ROUTER that rollout servers register with.

`WeightPublisher.publish(version, named_tensors, timeout_s)` sends the full update to every
registered server as schema-1 chunks (see `schema.py`), interleaving servers so a slow one does
not hold up the others, then waits for each server's ack. It never waits past `timeout_s`: a
server that has not acked by then is reported in `PublishResult.timed_out` (every update is a
full set of weights, and its subscriber drops the unfinished one when the next version starts).

Joining mid-run. Every `register` is answered with `welcome {version}` (the newest version the
learner holds: `announce`d at start, or the last published), and a server registered behind
that version is sent the last update again (the publisher keeps its packed chunks until the
next `publish`; one extra copy of the weights on the learner's rank 0). Between publishes the
learner calls `serve(budget_s)` from its receive loop, which answers registrations and moves
such catch-ups along: a rollout server restarted at the base weights, or started by
`train --resume`, holds the learner's weights before it generates (its service waits for them).

Flow control: ROUTER_MANDATORY plus a small send high-water mark per server, so a full pipe
answers EAGAIN (the server is skipped for now) instead of silently dropping chunks; a server
that vanished (EHOSTUNREACH) is unregistered. Data frames are views of the tensors (zero-copy):
the tensors must not be modified in place until `publish` returns and, for servers reported
as timed out, until the next `publish` (or the stale bytes fail the checksum and that server
rejects the update, keeping its old weights).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import zmq

from agentgym_rl.weights import schema

log = logging.getLogger(__name__)


@dataclass
class PublishResult:
    """Outcome of one `publish` call."""

    version: int
    acked: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Servers that rejected the update or failed to apply it, with their reason."""
    timed_out: list[str] = field(default_factory=list)
    seconds: float = 0.0
    bytes_per_server: int = 0
    chunks: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed and not self.timed_out


@dataclass
class _Server:
    server_id: str
    version: int = -1
    next_chunk: int = 0
    done: bool = True
    """Nothing to send or await; False while an update (publish or catch-up) is in flight."""


def _bind(sock: zmq.Socket[bytes], endpoint: str, wait_s: float = 2.0) -> None:
    """Bind, retrying "address in use" for `wait_s`: zmq releases a closed socket's port on its
    I/O thread, so a publisher restarted in the same process can find its port still held."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            sock.bind(endpoint)
            return
        except zmq.ZMQError as e:
            if e.errno != zmq.EADDRINUSE or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


class WeightPublisher:
    """Binds a ROUTER on `endpoint` (e.g. "tcp://*:5557" or "tcp://127.0.0.1:0")."""

    def __init__(
        self,
        endpoint: str,
        *,
        chunk_bytes: int = schema.DEFAULT_CHUNK_BYTES,
        sndhwm: int = 4,
    ) -> None:
        self.chunk_bytes = chunk_bytes
        self._sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._sock.setsockopt(zmq.SNDHWM, sndhwm)
        _bind(self._sock, endpoint)
        self.endpoint: str = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.servers: dict[bytes, _Server] = {}
        self.version = -1
        self.stale_acks = 0
        self.catch_ups = 0
        """Updates re-sent to servers that registered behind `version`."""
        self._latest: list[list[Any]] = []  # packed chunks of `version` (empty: none kept)

    def announce(self, version: int) -> None:
        """The learner holds `version` but has nothing to send (its starting weights, which
        every server loads itself): registrations are welcomed at that version."""
        if version < self.version:
            raise ValueError(f"version {version} is older than {self.version}")
        self.version = version

    def serve(self, budget_s: float) -> bool:
        """Answer registrations and send catch-up chunks for up to `budget_s` (returns as soon
        as nothing is left to do); True while a catch-up is still under way."""
        deadline = time.monotonic() + budget_s
        while True:
            self._drain(None)
            sending = [s for s in self.servers.values() if s.next_chunk < len(self._latest)]
            progressed = sum(self._send_some(s, self._latest) for s in sending)
            left = deadline - time.monotonic()
            if not sending or left <= 0:
                return any(not s.done for s in self.servers.values())
            if not progressed:
                self._sock.poll(int(min(left, 0.005) * 1000), zmq.POLLIN)

    def wait_for_servers(self, n: int, timeout_s: float) -> int:
        """Handle registrations until `n` servers are known or `timeout_s` passes."""
        deadline = time.monotonic() + timeout_s
        while len(self.servers) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self._sock.poll(int(left * 1000) + 1, zmq.POLLIN):
                self._handle(self._sock.recv_multipart(), None)
        return len(self.servers)

    def publish(
        self,
        version: int,
        named_tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
        timeout_s: float,
    ) -> PublishResult:
        """Send `version` to every registered server; wait for acks up to `timeout_s`."""
        if version <= self.version:
            raise ValueError(f"version {version} is not newer than {self.version}")
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        items = named_tensors.items() if isinstance(named_tensors, Mapping) else named_tensors
        tensors = [(n, t.detach().to("cpu").contiguous()) for n, t in items]
        chunks = schema.plan_chunks(version, tensors, self.chunk_bytes)
        messages = [schema.pack(c.header, c.frames) for c in chunks]
        self.version = version
        self._latest = messages
        result = PublishResult(version=version, chunks=len(chunks))
        result.bytes_per_server = sum(len(f) for c in chunks for f in c.frames)
        self._drain(result)
        for server in self.servers.values():
            server.next_chunk, server.done = 0, False
        while True:
            pending = [s for s in self.servers.values() if not s.done]
            if not pending:
                break
            sending = [s for s in pending if s.next_chunk < len(messages)]
            progressed = sum(self._send_some(server, messages) for server in sending)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            # Sending and nothing moved: every pipe is full, wait a little for acks/space.
            wait = left if not sending else (0.0 if progressed else min(left, 0.005))
            if self._sock.poll(int(wait * 1000), zmq.POLLIN):
                self._drain(result)
        result.timed_out = sorted(s.server_id for s in self.servers.values() if not s.done)
        if result.timed_out:
            log.warning(
                "version %d: no ack from %s within %.1fs", version, result.timed_out, timeout_s
            )
        result.seconds = time.monotonic() - t0
        return result

    def _send_some(self, server: _Server, messages: list[list[Any]]) -> int:
        """Send chunks to `server` until its pipe is full; returns how many went out."""
        ident = server.server_id.encode()
        sent = 0
        while server.next_chunk < len(messages):
            try:
                self._sock.send_multipart(
                    [ident, *messages[server.next_chunk]], flags=zmq.NOBLOCK, copy=False
                )
            except zmq.Again:
                return sent
            except zmq.ZMQError as exc:
                if exc.errno == zmq.EHOSTUNREACH:
                    log.warning("server %s unreachable: unregistered", server.server_id)
                    self.servers.pop(ident, None)
                    return sent
                raise
            server.next_chunk += 1
            sent += 1
        return sent

    def _drain(self, result: PublishResult | None) -> None:
        while self._sock.poll(0, zmq.POLLIN):
            self._handle(self._sock.recv_multipart(), result)

    def _handle(self, frames: list[bytes], result: PublishResult | None) -> None:
        ident, rest = frames[0], frames[1:]
        try:
            header, _ = schema.unpack(rest)
            kind = header["kind"]
        except (schema.MalformedMessage, KeyError) as exc:
            log.warning("malformed message from %r: %s", ident, exc)
            return
        if kind == "register":
            self._register(ident, int(header.get("version", -1)))
        elif kind == "ack":
            server = self.servers.get(ident)
            version = int(header.get("version", -1))
            if server is None or server.done or version != self.version:
                self.stale_acks += 1
                return
            server.done = True
            if header.get("ok"):
                server.version = version
                if result is not None:
                    result.acked.append(server.server_id)
            elif result is not None:
                result.failed[server.server_id] = str(header.get("reason", "unknown"))
            else:
                log.warning(
                    "server %s rejected the catch-up to version %d: %s",
                    server.server_id,
                    version,
                    header.get("reason", "unknown"),
                )

    def _register(self, ident: bytes, version: int) -> None:
        """Welcome a (re-)registering server; one behind `self.version` is sent the last
        update again unless one is already on its way (registrations repeat every few s)."""
        server = self.servers.get(ident)
        if server is None:
            server = self.servers[ident] = _Server(ident.decode(errors="replace"), version)
            log.info("server %s registered at version %d", server.server_id, version)
        elif server.done:
            server.version = version
        welcome = schema.pack({"kind": "welcome", "version": self.version})
        try:
            self._sock.send_multipart([ident, *welcome], flags=zmq.NOBLOCK)
        except zmq.ZMQError:
            return  # a full or vanished pipe: it registers again in a few seconds
        if server.done and version < self.version and self._latest:
            log.info(
                "server %s is at version %d: sending version %d",
                server.server_id,
                version,
                self.version,
            )
            server.next_chunk, server.done = 0, False
            self.catch_ups += 1

    def close(self) -> None:
        self._sock.close(linger=0)
