"""Pure-pyzmq receiver (ROUTER) speaking the group stream protocol.

Same behaviour and API as ``agentgym_rl._core.GroupReceiver`` (credit window per sender,
de-duplication by (sender, session, seq), acknowledgement when ``recv`` hands a group out), but
single-threaded: protocol traffic is handled inside ``recv``. A test peer: the interop and
recovery tests run it against the Rust sender; the shipped package uses only the Rust transport.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import zmq

from . import pyzmq_protocol as protocol


@dataclass
class _Peer:
    routing_id: bytes
    session: int
    hs: int
    expected: int
    acked: int
    queued: int = 0
    outstanding: int = 0
    gap_notified_hs: int = 0


class PyzmqGroupReceiver:
    def __init__(self, bind: str = "tcp://127.0.0.1:0", *, window: int = 16) -> None:
        if window < 1:
            raise ValueError("window must be at least 1")
        self.window = window
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(protocol.tcp_wildcard(bind))
        self.endpoint: str = self._sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        self._peers: dict[str, _Peer] = {}
        self._queue: deque[tuple[str, int, int, bytes]] = deque()
        self._stats = dict.fromkeys(
            ("received", "delivered", "duplicates", "gaps", "handshakes", "rejected", "senders"),
            0,
        )

    def _reply(self, routing_id: bytes, t: str, **fields: Any) -> None:
        try:
            self._sock.send_multipart([routing_id, protocol.pack(t, **fields)], zmq.NOBLOCK)
        except zmq.Again:
            pass  # the sender handshakes again if it misses this

    def _handle(self, frames: list[bytes]) -> None:
        if len(frames) < 2 or (msg := protocol.unpack(frames[1])) is None:
            self._stats["rejected"] += 1
            return
        rid, t = frames[0], msg["t"]
        if t == "hello":
            self._hello(rid, msg)
        elif t == "data":
            self._data(rid, msg, frames[2] if len(frames) > 2 else b"")
        elif t == "ping":
            p = self._peers.get(msg.get("sender", ""))
            if p is not None and p.session == msg.get("session"):
                self._reply(rid, "pong", session=p.session, hs=p.hs)
            else:
                self._reply(rid, "hello_required")
        else:
            self._stats["rejected"] += 1

    def _hello(self, rid: bytes, msg: dict[str, Any]) -> None:
        if msg.get("v") != protocol.PROTOCOL_VERSION:
            self._stats["rejected"] += 1
            reason = (
                f"sender speaks protocol {msg.get('v')}, this receiver {protocol.PROTOCOL_VERSION}"
            )
            self._reply(rid, "reject", reason=reason)
            return
        sender, session, hs, first = msg["sender"], msg["session"], msg["hs"], msg["first_unacked"]
        p = self._peers.get(sender)
        if p is None:
            self._stats["senders"] += 1
        if p is None or p.session != session:
            p = _Peer(rid, session, hs, expected=first, acked=first)
            self._peers[sender] = p
        p.routing_id, p.hs = rid, hs
        p.expected, p.acked = max(p.expected, first), max(p.acked, first)
        p.outstanding = max(0, self.window - p.queued)
        self._stats["handshakes"] += 1
        self._reply(
            rid,
            "ready",
            v=protocol.PROTOCOL_VERSION,
            session=session,
            hs=hs,
            next=p.expected,
            acked=p.acked,
            credit=p.outstanding,
            window=self.window,
        )

    def _data(self, rid: bytes, msg: dict[str, Any], payload: bytes) -> None:
        sender, session, seq = msg.get("sender"), msg.get("session"), msg.get("seq")
        p = self._peers.get(sender) if isinstance(sender, str) else None
        if p is None or p.session != session or not isinstance(seq, int):
            self._stats["rejected"] += 1
            self._reply(rid, "hello_required")
            return
        if seq < p.expected:
            self._stats["duplicates"] += 1
            return
        if seq > p.expected:
            self._stats["gaps"] += 1
            if p.gap_notified_hs != p.hs:
                p.gap_notified_hs = p.hs
                self._reply(rid, "hello_required")
            return
        p.expected += 1
        p.queued += 1
        p.outstanding = max(0, p.outstanding - 1)
        self._queue.append((sender, session, seq, payload))
        self._stats["received"] += 1

    def _consumed(self, sender: str, session: int, seq: int) -> None:
        self._stats["delivered"] += 1
        p = self._peers.get(sender)
        if p is None or p.session != session:
            return
        p.acked = max(p.acked, seq + 1)
        p.queued = max(0, p.queued - 1)
        grant = max(0, self.window - p.queued - p.outstanding)
        p.outstanding += grant
        self._reply(p.routing_id, "ack", session=session, hs=p.hs, acked=p.acked, credit=grant)

    def recv_seq(self, timeout_s: float = 1.0) -> tuple[str, int, bytes] | None:
        deadline = time.monotonic() + timeout_s
        while not self._queue:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._sock.poll(int(remaining * 1000) + 1):
                if not self._sock.poll(0):
                    return None
            while self._sock.poll(0):
                self._handle(self._sock.recv_multipart(copy=True))
        sender, session, seq, payload = self._queue.popleft()
        self._consumed(sender, session, seq)
        return sender, seq, payload

    def recv(self, timeout_s: float = 1.0) -> tuple[str, bytes] | None:
        got = self.recv_seq(timeout_s)
        return None if got is None else (got[0], got[2])

    def stats(self) -> dict[str, int]:
        return dict(self._stats)

    def close(self) -> None:
        if not self._sock.closed:
            self._sock.close(linger=0)
            self._ctx.term()

    def __enter__(self) -> PyzmqGroupReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
