"""Wire format of the weight stream (learner -> rollout servers, rollout server -> rollout
server), schema version 1.

Every message is a multipart ZeroMQ message `[MAGIC, header, *data]`; the header is a msgpack
map with `schema` and `kind`:

* `register` (subscriber -> publisher): `{server_id, version, relay}`; `version` is the last
  version the server applied (-1: none); `relay` is the endpoint other servers relay chunks to
  (`tcp://:PORT`: the host is the address the learner sees the registration come from; absent
  or None: this server relays nothing and is always a leaf).
* `route` (sender -> subscriber, before the chunks of a version): `{version, stall_s,
  children}`. `children` is this server's subtree of the relay tree, a list of
  `[server_id, relay_endpoint, children]`; the server forwards every verified chunk of
  `version` to each child (after sending the child its own `route`). `stall_s`: a child with
  chunks outstanding and no `credit` for that long is reported in `relay_failed`.
* `chunk` (publisher or a relaying server -> subscriber): one piece of update `version`:
  `{version, index, count, pieces, crc32, digest, total_bytes}`. `pieces[i]` describes data
  frame `i`: `{name, dtype, shape, offset, nbytes}`, i.e. bytes `[offset, offset + nbytes)` of
  HF parameter `name` (raw little-endian, `dtype` a torch dtype name). A large tensor spans
  several pieces and chunks. `crc32` covers this chunk's data frames in order; `digest` is the
  blake2b-128 of all data frames of the whole update in order (same in every chunk). Relays
  forward chunk messages byte for byte, so every hop checks the learner's checksums.
* `credit` (subscriber -> the server relaying to it): `{version, index}`, chunk `index`
  verified.
* `relay_failed` (relaying subscriber -> publisher): `{version, child}`: `child` stopped taking
  chunks (no credit for `stall_s`); the learner sends it (its subtree) the update itself.
* `ack` (subscriber -> publisher): `{server_id, version, ok, reason, seconds}`.
* `welcome` (publisher -> subscriber, the answer to every `register`): `{version}`, the newest
  version the learner holds (-1: not announced yet). A subscriber behind it is sent that
  version's chunks right after (a server that joins or restarts mid-run catches up).
* `refused` (publisher -> a peer whose message failed authentication): `{reason}`, signed; the
  peer cannot verify it either, and stops with its own reason (`signing.py`).

Data frames travel as raw bytes, zero-copy on the sending side (views of the tensors). With the
run's secret every message is signed (`signing.py`: magic `AGS1` and a trailing tag frame).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import torch

MAGIC = b"AGW1"
SCHEMA_VERSION = 1
DEFAULT_CHUNK_BYTES = 32 << 20

_DTYPES: dict[str, torch.dtype] = {
    name: dt
    for name, dt in vars(torch).items()
    if isinstance(dt, torch.dtype) and not name.startswith("_")
}


class MalformedMessage(ValueError):
    """A message that does not follow schema 1."""


def dtype_from_name(name: str) -> torch.dtype:
    """The torch dtype called `name` (e.g. "float32", "bfloat16")."""
    try:
        return _DTYPES[name]
    except KeyError:
        raise MalformedMessage(f"unknown dtype {name!r}") from None


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def pack(header: dict[str, Any], data: Sequence[Any] = ()) -> list[Any]:
    """Frames for one message."""
    return [MAGIC, msgpack.packb({"schema": SCHEMA_VERSION, **header}), *data]


def unpack(frames: Sequence[Any]) -> tuple[dict[str, Any], list[memoryview]]:
    """Header and data frames of one message; raises `MalformedMessage`."""
    if len(frames) < 2 or bytes(frame_buffer(frames[0])) != MAGIC:
        raise MalformedMessage("missing magic or header frame")
    try:
        header = msgpack.unpackb(frame_buffer(frames[1]), raw=False)
    except Exception as exc:
        raise MalformedMessage(f"header is not msgpack: {exc}") from None
    if not isinstance(header, dict) or header.get("schema") != SCHEMA_VERSION:
        raise MalformedMessage(f"unsupported schema in {str(header)[:80]}")
    return header, [frame_buffer(f) for f in frames[2:]]


def frame_buffer(frame: Any) -> memoryview:
    """The bytes of a frame: a zmq.Frame (received with copy=False) or any buffer."""
    return memoryview(frame.buffer if hasattr(frame, "buffer") else frame)


def tensor_bytes(tensor: torch.Tensor) -> memoryview:
    """A flat byte view of a CPU, contiguous tensor (no copy)."""
    return tensor.reshape(-1).view(torch.uint8).numpy().data


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk to send: header fields and its data frames."""

    header: dict[str, Any]
    frames: list[memoryview]


def plan_chunks(
    version: int,
    named_tensors: Iterable[tuple[str, torch.Tensor]],
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> list[Chunk]:
    """Split an update into chunks of about `chunk_bytes` (tensors may span chunks).

    Tensors must be CPU and contiguous (the frames are views of them: do not modify them until
    every subscriber has them, or the checksums fail and the update is rejected).
    """
    if chunk_bytes <= 0:
        raise ValueError("chunk_bytes must be positive")
    groups: list[list[tuple[dict[str, Any], memoryview]]] = [[]]
    room = chunk_bytes
    for name, tensor in named_tensors:
        raw = tensor_bytes(tensor)
        base = {"name": name, "dtype": dtype_name(tensor.dtype), "shape": list(tensor.shape)}
        offset = 0
        while True:
            take = min(room, len(raw) - offset)
            piece = raw[offset : offset + take]
            groups[-1].append(({**base, "offset": offset, "nbytes": take}, piece))
            offset += take
            room -= take
            if room <= 0:
                groups.append([])
                room = chunk_bytes
            if offset >= len(raw):
                break
    groups = [g for g in groups if g]
    digest = hashlib.blake2b(digest_size=16)
    total = 0
    for group in groups:
        for _, piece in group:
            digest.update(piece)
            total += len(piece)
    chunks = []
    for index, group in enumerate(groups):
        frames = [piece for _, piece in group]
        header = {
            "kind": "chunk",
            "version": version,
            "index": index,
            "count": len(groups),
            "pieces": [meta for meta, _ in group],
            "crc32": crc32_frames(frames),
            "digest": digest.hexdigest(),
            "total_bytes": total,
        }
        chunks.append(Chunk(header=header, frames=frames))
    return chunks


def crc32_frames(frames: Iterable[memoryview]) -> int:
    crc = 0
    for frame in frames:
        crc = zlib.crc32(frame, crc)
    return crc
