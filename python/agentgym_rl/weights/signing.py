"""Signing of weight-stream messages under the run's secret (HMAC-SHA256).

A signed message is `[MAGIC_SIGNED, header, *data, tag]`: `tag` is the HMAC-SHA256, under the
secret, of a context label, the magic, the header and the length of every data frame, each
prefixed with its length (u64 little-endian). The data bytes themselves are bound through the
header: a chunk's header carries the crc32 of its data and the blake2b digest of the whole
update, and a server checks both before it relays a chunk (crc32) and before it applies an
update (digest), so forged bytes under a genuine header are rejected as `checksum` and never
applied. Signing costs one HMAC over a small header per message, not a pass over the weights.

Relays forward chunk messages byte for byte, tag included, so every server verifies the
learner's own signature on every chunk; the messages a relay writes itself (`route`, `credit`)
it signs with the same secret. A message is verified (constant time) before anything in it is
decoded. Without a secret messages are plain (`MAGIC`) and a signed one is refused: the two
sides of the stream must agree, and each side says which one lacks the secret.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Any

from agentgym_rl.weights import schema

MAGIC_SIGNED = b"AGS1"
TAG_BYTES = 32
_CONTEXT = b"agentgym-rl weight stream v1"


class Unauthenticated(Exception):
    """A message that is unsigned, signed under another secret, or signed when this side has
    no secret."""


def peer_address(frame: Any) -> str:
    """The sending peer's IP address as libzmq reports it for a frame received with
    `copy=False`, or "unknown"."""
    try:
        return str(frame.get("Peer-Address"))
    except Exception:
        return "unknown"


class Signer:
    """Packs and opens weight-stream messages; `Signer(None)` leaves them plain."""

    def __init__(self, secret: bytes | None) -> None:
        self._secret = secret

    @property
    def signs(self) -> bool:
        return self._secret is not None

    def _tag(self, frames: Sequence[Any]) -> bytes:
        """The tag of a message's magic and header, and of its data frames' lengths."""
        assert self._secret is not None
        mac = hmac.new(self._secret, _CONTEXT, hashlib.sha256)
        for i, frame in enumerate(frames):
            buf = schema.frame_buffer(frame)
            mac.update(len(buf).to_bytes(8, "little"))
            if i < 2:
                mac.update(buf)
        return mac.digest()

    def pack(self, header: dict[str, Any], data: Sequence[Any] = ()) -> list[Any]:
        """Frames of one message, signed when there is a secret."""
        frames = schema.pack(header, data)
        if self._secret is None:
            return frames
        frames[0] = MAGIC_SIGNED
        frames.append(self._tag(frames))
        return frames

    def data_bytes(self, frames: Sequence[Any]) -> int:
        """Bytes of the data frames of a packed message (its tag not counted)."""
        data = frames[2:-1] if self._secret is not None else frames[2:]
        return sum(len(schema.frame_buffer(f)) for f in data)

    def open(self, frames: Sequence[Any]) -> list[Any]:
        """The frames of a verified message, tag removed and magic plain (ready for
        `schema.unpack`); raises `Unauthenticated`."""
        magic = bytes(schema.frame_buffer(frames[0])) if frames else b""
        if self._secret is None:
            if magic == MAGIC_SIGNED:
                raise Unauthenticated("the message is signed, but this side has no secret")
            return list(frames)
        if magic != MAGIC_SIGNED or len(frames) < 3:
            raise Unauthenticated("the message is not signed (the sender has no secret)")
        body, tag = frames[:-1], bytes(schema.frame_buffer(frames[-1]))
        if len(tag) != TAG_BYTES or not hmac.compare_digest(self._tag(body), tag):
            raise Unauthenticated("the signature does not verify (the sender holds another secret)")
        return [schema.MAGIC, *body[1:]]
