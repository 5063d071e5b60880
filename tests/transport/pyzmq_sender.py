"""Pure-pyzmq sender (DEALER) speaking the group stream protocol.

Same API as ``agentgym_rl._core.GroupSender``. Single-threaded: acks, credit and heartbeats are
processed inside ``send``/``flush``/``wait_connected``. libzmq reconnects the DEALER by itself;
a restarted receiver answers this session's traffic with ``hello_required`` and the sender
handshakes again and resends what was not accepted. A test peer: the interop and recovery tests
run it against the Rust receiver; the shipped package uses only the Rust transport.
"""

from __future__ import annotations

import os
import socket
import time
from collections import deque
from typing import Any

import zmq

from agentgym_rl._core import ProtocolError, TransportClosed, TransportTimeout

from . import pyzmq_protocol as protocol


class PyzmqGroupSender:
    def __init__(
        self,
        endpoint: str,
        sender_id: str | None = None,
        *,
        heartbeat_s: float = 0.5,
        peer_timeout_s: float = 3.0,
        handshake_timeout_s: float = 2.0,
    ) -> None:
        self.endpoint = endpoint
        self.sender_id = sender_id or f"{socket.gethostname()}-{os.getpid()}-{os.urandom(4).hex()}"
        self._heartbeat = heartbeat_s
        self._peer_timeout = peer_timeout_s
        self._handshake_timeout = handshake_timeout_s
        self._session = protocol.new_session()
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.IMMEDIATE, 1)
        self._sock.setsockopt(zmq.RECONNECT_IVL, 50)
        self._sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
        self._sock.connect(endpoint)
        self._unacked: deque[tuple[int, bytes]] = deque()
        self._next_seq = self._acked = self._cursor = 0
        self._hs = 0
        self._credit = 0
        self._connected = False
        self._closed = False
        self._last_heard = self._last_sent = time.monotonic()
        self._handshakes = self._resent = 0
        self._hello()

    # -- protocol -------------------------------------------------------------------------------
    def _send(self, frames: list[bytes]) -> bool:
        try:
            self._sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return False
        self._last_sent = time.monotonic()
        return True

    def _hello(self) -> None:
        self._hs += 1
        self._connected = False
        self._credit = 0
        self._hello_at = time.monotonic()
        self._send(
            [
                protocol.pack(
                    "hello",
                    v=protocol.PROTOCOL_VERSION,
                    sender=self.sender_id,
                    session=self._session,
                    hs=self._hs,
                    first_unacked=self._acked,
                )
            ]
        )

    def _drop_acked(self, acked: int) -> None:
        while self._unacked and self._unacked[0][0] < acked:
            self._unacked.popleft()
        self._acked = max(self._acked, acked)
        self._cursor = max(self._cursor, self._acked)

    def _drain(self) -> None:
        """Transmit unsent groups (the backlog after a handshake) while credit lasts."""
        while self._connected and self._credit > 0 and self._cursor < self._next_seq:
            seq, payload = self._unacked[self._cursor - self._acked]
            header = protocol.pack(
                "data", sender=self.sender_id, session=self._session, hs=self._hs, seq=seq
            )
            if not self._send([header, payload]):
                return
            self._cursor += 1
            self._credit -= 1
            self._resent += 1

    def _handle(self, msg: dict[str, Any]) -> None:
        t = msg["t"]
        if t == "ready" and msg.get("hs") == self._hs:
            if msg.get("v") != protocol.PROTOCOL_VERSION:
                raise ProtocolError(f"receiver speaks protocol {msg.get('v')}")
            self._drop_acked(msg["acked"])
            self._cursor = max(msg["next"], self._acked)
            self._credit = msg["credit"]
            self._connected = True
            self._handshakes += 1
            self._drain()
        elif t == "ack" and msg.get("session") == self._session:
            self._drop_acked(msg["acked"])
            if msg.get("hs") == self._hs:
                self._credit += msg["credit"]
                self._drain()
        elif t == "hello_required":
            self._hello()
        elif t == "reject":
            self._closed = True
            raise ProtocolError(f"receiver rejected this sender: {msg.get('reason')}")

    def _pump(self, timeout_s: float) -> None:
        """Process incoming messages for up to ``timeout_s``, then keep the link alive."""
        if self._sock.poll(max(0, int(timeout_s * 1000))):
            while self._sock.poll(0):
                frames = self._sock.recv_multipart()
                self._last_heard = time.monotonic()
                if (msg := protocol.unpack(frames[0])) is not None:
                    self._handle(msg)
        now = time.monotonic()
        if not self._connected:
            if now - self._hello_at > self._handshake_timeout:
                self._hello()
        elif now - self._last_heard > self._peer_timeout:
            self._hello()
        elif now - self._last_sent > self._heartbeat:
            self._send(
                [protocol.pack("ping", sender=self.sender_id, session=self._session, hs=self._hs)]
            )

    def _wait(self, timeout_s: float, what: str, done: Any) -> None:
        if self._closed:
            raise TransportClosed("transport closed")
        deadline = time.monotonic() + timeout_s
        self._pump(0)
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TransportTimeout(f"timed out after {timeout_s} s waiting for {what}")
            self._pump(min(remaining, self._heartbeat))

    # -- API ------------------------------------------------------------------------------------
    def send(self, payload: bytes, timeout_s: float = 60.0) -> int:
        """Send one group under credit; returns its seq. On timeout nothing is queued."""

        def ready() -> bool:
            return self._connected and self._credit > 0 and self._cursor == self._next_seq

        self._wait(timeout_s, "credit from the receiver", ready)
        seq = self._next_seq
        self._unacked.append((seq, payload))
        self._next_seq += 1
        header = protocol.pack(
            "data", sender=self.sender_id, session=self._session, hs=self._hs, seq=seq
        )
        if self._send([header, payload]):
            self._cursor += 1
            self._credit -= 1
        return seq

    def flush(self, timeout_s: float = 60.0) -> None:
        self._wait(timeout_s, "acknowledgement", lambda: self._acked == self._next_seq)

    def wait_connected(self, timeout_s: float = 60.0) -> None:
        self._wait(timeout_s, "the receiver's READY", lambda: self._connected)

    def stats(self) -> dict[str, Any]:
        return {
            "sent": self._next_seq,
            "acked": self._acked,
            "unacked": self._next_seq - self._acked,
            "resent": self._resent,
            "handshakes": self._handshakes,
            "credit": self._credit,
            "connected": self._connected,
        }

    def close(self) -> None:
        if not self._sock.closed:
            self._closed = True
            self._sock.close(linger=0)
            self._ctx.term()

    def __enter__(self) -> PyzmqGroupSender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
