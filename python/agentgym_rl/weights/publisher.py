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

import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import zmq

from agentgym_rl.auth import RefusalLog
from agentgym_rl.weights import schema
from agentgym_rl.weights.signing import Signer, Unauthenticated, peer_address

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
    """Size of one copy of the update (data bytes)."""
    chunks: int = 0
    bytes_sent: int = 0
    """Data bytes the learner itself sent for this update (re-sends included): one copy per
    tree root when every relay works."""
    roots: list[str] = field(default_factory=list)
    """Servers the learner sent the update to at the start (the rest were relayed to)."""
    depth: int = 0
    """Hops from the learner to the deepest server of the relay tree (1: a star)."""
    rerouted: list[str] = field(default_factory=list)
    """Servers whose relay failed them (or was unreachable): the learner sent them the update."""
    retried: dict[str, str] = field(default_factory=dict)
    """Servers that rejected a relayed copy (reason) and were sent the update again directly."""

    @property
    def ok(self) -> bool:
        return not self.failed and not self.timed_out


@dataclass
class _Server:
    server_id: str
    version: int = -1
    relay: str | None = None
    """Endpoint other servers relay to (None: a leaf only)."""
    outbox: list[list[Any]] = field(default_factory=list)
    """Messages of the update in flight to this server: its route, then the chunks."""
    next_chunk: int = 0
    done: bool = True
    """Nothing to send or await; False while an update (publish or catch-up) is in flight."""
    healthy: bool = True
    """Acked the last update it was sent: may relay. A server that did not is fed directly
    by the learner (and relays to nobody) until it acks again."""
    registrations: int = 0
    """Registrations received (the first and every periodic one since)."""
    retried: bool = False


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


def plan_tree(members: list[bytes], fanout: int) -> tuple[list[bytes], dict[bytes, list[bytes]]]:
    """A breadth-first tree over `members` (in order): the learner feeds the first `fanout`,
    each member relays to up to `fanout` of the next ones. Returns the roots and each member's
    children. `fanout >= len(members)` is a star."""
    roots: list[bytes] = []
    children: dict[bytes, list[bytes]] = {ident: [] for ident in members}
    open_parents: deque[bytes] = deque()
    for ident in members:
        while open_parents and len(children[open_parents[0]]) >= fanout:
            open_parents.popleft()
        if len(roots) < fanout:
            roots.append(ident)
        else:
            children[open_parents[0]].append(ident)
        open_parents.append(ident)
    return roots, children


class WeightPublisher:
    """Binds a ROUTER on `endpoint` (e.g. "tcp://*:5557" or "tcp://127.0.0.1:0").

    `fanout`: servers the learner sends each update to, and servers each of them relays it to
    (a tree; at least the number of servers: every server is sent the update by the learner).
    `relay_stall_s`: a relay reports a child that takes no chunk for this long.
    `secret`: sign every message and accept only messages signed with it (`signing.py`);
    refused ones are counted and logged with the peer's address (`refusals`)."""

    def __init__(
        self,
        endpoint: str,
        *,
        chunk_bytes: int = schema.DEFAULT_CHUNK_BYTES,
        sndhwm: int = 4,
        fanout: int = 2,
        relay_stall_s: float = 5.0,
        secret: bytes | None = None,
    ) -> None:
        if fanout < 1:
            raise ValueError("fanout must be at least 1")
        self.chunk_bytes = chunk_bytes
        self.fanout = fanout
        self.relay_stall_s = relay_stall_s
        self._signer = Signer(secret)
        self.refusals = RefusalLog("weights (learner)")
        """Messages refused for want of a valid signature (`refusals.total`)."""
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
        self.bytes_sent = 0
        """Data bytes sent in all (publishes, re-routes, catch-ups)."""
        self._latest: list[list[Any]] = []  # packed chunks of `version` (empty: none kept)
        self._children: dict[bytes, list[bytes]] = {}  # the relay tree of `version`
        self._result: PublishResult | None = None  # of `version`, until the next publish

    def announce(self, version: int) -> None:
        """The learner holds `version` but has nothing to send (its starting weights, which
        every server loads itself): registrations are welcomed at that version."""
        if version < self.version:
            raise ValueError(f"version {version} is older than {self.version}")
        self.version = version

    def serve(self, budget_s: float) -> bool:
        """Answer registrations, send catch-up and re-routed chunks for up to `budget_s`
        (returns as soon as nothing is left to do); True while an update is still under way."""
        deadline = time.monotonic() + budget_s
        while True:
            self._drain(None)
            sending = [s for s in self.servers.values() if s.next_chunk < len(s.outbox)]
            progressed = sum(self._send_some(s) for s in sending)
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
                self._handle(self._sock.recv_multipart(copy=False), None)
        return len(self.servers)

    def publish(
        self,
        version: int,
        named_tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
        timeout_s: float,
    ) -> PublishResult:
        """Send `version` down the relay tree of the registered servers; wait for every
        server's ack up to `timeout_s`."""
        if version <= self.version:
            raise ValueError(f"version {version} is not newer than {self.version}")
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        items = named_tensors.items() if isinstance(named_tensors, Mapping) else named_tensors
        tensors = [(n, t.detach().to("cpu").contiguous()) for n, t in items]
        chunks = schema.plan_chunks(version, tensors, self.chunk_bytes)
        result = PublishResult(version=version, chunks=len(chunks))
        self._drain(None)  # acks of the previous version count there
        self.version = version
        self._latest = [self._signer.pack(c.header, c.frames) for c in chunks]
        self._result = result
        result.bytes_per_server = sum(len(f) for c in chunks for f in c.frames)
        # Servers that relay and acked their last update form the tree; the others (no relay
        # endpoint, or a failed last update) are sent the update directly.
        members = [i for i, s in self.servers.items() if s.healthy and s.relay is not None]
        roots, self._children = plan_tree(members, self.fanout)
        roots += [i for i in self.servers if i not in self._children]
        result.depth = self._depth(roots)
        result.roots = [self.servers[i].server_id for i in roots]
        for server in self.servers.values():
            server.done, server.retried, server.outbox, server.next_chunk = False, False, [], 0
        for ident in roots:
            self._feed(ident)
        while True:
            pending = [s for s in self.servers.values() if not s.done]
            if not pending:
                break
            sending = [s for s in pending if s.next_chunk < len(s.outbox)]
            progressed = sum(self._send_some(server) for server in sending)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            # Sending and nothing moved: every pipe is full, wait a little for acks/space.
            wait = min(left, 0.05) if not sending else (0.0 if progressed else min(left, 0.005))
            if self._sock.poll(int(wait * 1000), zmq.POLLIN):
                self._drain(result)
        result.timed_out = sorted(s.server_id for s in self.servers.values() if not s.done)
        for server in self.servers.values():
            if not server.done:
                server.healthy = False
        if result.timed_out:
            log.warning(
                "version %d: no ack from %s within %.1fs", version, result.timed_out, timeout_s
            )
        result.seconds = time.monotonic() - t0
        self._result = None  # later acks and re-routes are logged, not added to it
        return result

    def _depth(self, roots: list[bytes]) -> int:
        def down(ident: bytes) -> int:
            return 1 + max((down(c) for c in self._children.get(ident, [])), default=0)

        return max((down(r) for r in roots), default=0)

    def _subtree(self, ident: bytes) -> list[Any]:
        out = []
        for child in self._children.get(ident, []):
            server = self.servers.get(child)
            if (server is not None and server.relay is not None) or not self._children.get(child):
                if server is not None:
                    out.append([server.server_id, server.relay, self._subtree(child)])
        return out

    def _feed(self, ident: bytes) -> None:
        """Send the current update to `ident` (with its subtree of the relay tree) directly."""
        server = self.servers.get(ident)
        if server is None:
            return
        route = {"kind": "route", "version": self.version, "stall_s": self.relay_stall_s}
        route_msg = self._signer.pack({**route, "children": self._subtree(ident)})
        server.outbox, server.next_chunk, server.done = [route_msg, *self._latest], 0, False

    def _adopt(self, ident: bytes, why: str) -> None:
        """A server its relay cannot feed (`why`): the learner sends it the update itself."""
        server = self.servers.get(ident)
        if server is None or server.done or server.outbox:
            return  # gone, finished, or already fed by the learner
        log.warning("version %d: %s; sending it to %s directly", self.version, why, ident)
        server.healthy = False
        if self._result is not None:
            self._result.rerouted.append(server.server_id)
        self._feed(ident)

    def _send_some(self, server: _Server) -> int:
        """Send messages to `server` until its pipe is full; returns how many went out."""
        ident = server.server_id.encode()
        sent = 0
        while server.next_chunk < len(server.outbox):
            message = server.outbox[server.next_chunk]
            try:
                self._sock.send_multipart([ident, *message], flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return sent
            except zmq.ZMQError as exc:
                if exc.errno == zmq.EHOSTUNREACH:
                    log.warning("server %s unreachable: unregistered", server.server_id)
                    self.servers.pop(ident, None)
                    for child in self._children.get(ident, []):
                        self._adopt(child, f"its relay {server.server_id} is unreachable")
                    return sent
                raise
            data = self._signer.data_bytes(message)
            self.bytes_sent += data
            if self._result is not None and self._result.version == self.version:
                self._result.bytes_sent += data
            server.next_chunk += 1
            sent += 1
        return sent

    def _drain(self, result: PublishResult | None) -> None:
        while self._sock.poll(0, zmq.POLLIN):
            self._handle(self._sock.recv_multipart(copy=False), result)

    def _handle(self, frames: list[Any], result: PublishResult | None) -> None:
        ident = frames[0].bytes
        try:
            rest = self._signer.open(frames[1:])
        except Unauthenticated as exc:
            self.refusals.note(peer_address(frames[0]), str(exc))
            # Answered, signed: a server without this secret cannot verify the answer and
            # stops with the reason, instead of waiting for weights forever.
            refused = self._signer.pack({"kind": "refused", "reason": str(exc)})
            with contextlib.suppress(zmq.ZMQError):
                self._sock.send_multipart([ident, *refused], flags=zmq.NOBLOCK)
            return
        try:
            header, _ = schema.unpack(rest)
            kind = header["kind"]
        except (schema.MalformedMessage, KeyError) as exc:
            log.warning("malformed message from %r: %s", ident, exc)
            return
        if kind == "register":
            relay = header.get("relay")
            if isinstance(relay, str) and relay.startswith("tcp://:"):
                host = str(frames[0].get("Peer-Address"))  # as the learner sees the server
                port = relay.removeprefix("tcp://:")
                relay = f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"
            self._register(ident, int(header.get("version", -1)), relay)
        elif kind == "relay_failed":
            if int(header.get("version", -1)) == self.version:
                child, by = str(header.get("child")), header.get("server_id")
                self._adopt(child.encode(), f"relay {by} cannot feed {child}")
        elif kind == "ack":
            self._ack(ident, header, result)

    def _ack(self, ident: bytes, header: dict[str, Any], result: PublishResult | None) -> None:
        server = self.servers.get(ident)
        version = int(header.get("version", -1))
        if server is None or server.done or version != self.version:
            self.stale_acks += 1
            return
        reason = str(header.get("reason", "unknown"))
        if not header.get("ok") and reason in _TRANSPORT and not server.retried:
            # A relayed copy that did not check out (or stopped): once more, from the learner.
            server.retried = True
            if result is not None:
                result.retried[server.server_id] = reason
            server.outbox = []
            self._adopt(ident, f"{server.server_id} rejected a relayed copy ({reason})")
            return
        server.done = True
        if header.get("ok"):
            server.version, server.healthy = version, True
            if result is not None and server.server_id not in result.acked:
                result.acked.append(server.server_id)
        elif result is not None:
            result.failed[server.server_id] = reason
        if not header.get("ok"):
            log.warning("server %s rejected version %d: %s", server.server_id, version, reason)

    def _register(self, ident: bytes, version: int, relay: str | None) -> None:
        """Welcome a (re-)registering server; one behind `self.version` is sent the last
        update again unless one is already on its way (registrations repeat every few s)."""
        server = self.servers.get(ident)
        if server is None:
            server = self.servers[ident] = _Server(ident.decode(errors="replace"), version)
            log.info(
                "server %s registered at version %d (relay %s)", server.server_id, version, relay
            )
        elif server.done:
            server.version = version
        server.registrations += 1
        server.relay = relay
        welcome = self._signer.pack({"kind": "welcome", "version": self.version})
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
            self._children.pop(ident, None)  # a catch-up relays to nobody
            route = {"kind": "route", "version": self.version, "stall_s": self.relay_stall_s}
            server.outbox = [self._signer.pack({**route, "children": []}), *self._latest]
            server.next_chunk, server.done = 0, False
            self.catch_ups += 1

    def close(self) -> None:
        self._sock.close(linger=0)


_TRANSPORT = ("malformed", "checksum", "out_of_order", "incomplete", "unauthenticated")
