"""Control messages of the group stream (mirror of ``crates/agentgym-transport/src/protocol.rs``).

Each message is a multipart ZeroMQ message: a msgpack header map with a ``"t"`` tag, plus the
payload frame for ``data``. See the Rust module for the full contract. Spoken by the pure-pyzmq
test peers (``pyzmq_sender.py``, ``pyzmq_receiver.py``).
"""

from __future__ import annotations

import secrets
from typing import Any

import msgpack

PROTOCOL_VERSION = 1


def pack(t: str, **fields: Any) -> bytes:
    return msgpack.packb({"t": t, **fields}, use_bin_type=True)


def unpack(frame: bytes) -> dict[str, Any] | None:
    """The header as a dict, or None when the frame is not a protocol header."""
    try:
        msg = msgpack.unpackb(frame, raw=False)
    except Exception:
        return None
    if isinstance(msg, dict) and isinstance(msg.get("t"), str):
        return msg
    return None


def new_session() -> int:
    return secrets.randbits(64)


def tcp_wildcard(endpoint: str) -> str:
    """libzmq spells an OS-chosen port ``*``; accept ``:0`` like the Rust receiver does."""
    if endpoint.startswith("tcp://") and endpoint.endswith(":0"):
        return endpoint[:-2] + ":*"
    return endpoint
