"""Rollout side of the weight stream: reassemble, verify, apply, ack.

`UpdateAssembler` is the socket-free core: it takes chunk messages in arrival order and returns
a complete, verified update (`version`, HF-named tensors) or raises `UpdateRejected` with a
reason; every rejection is counted in `rejections` and nothing is applied, so the engine keeps
its old weights. Reasons: `malformed` (bad framing, header, piece layout), `checksum` (chunk crc32
or whole-update blake2b mismatch), `out_of_order` (a chunk index other than the next one),
`incomplete` (a newer version started, or no chunk arrived for `chunk_timeout_s` mid-update),
`stale` (a version not newer than the last applied one), `apply_failed` (the callback raised),
`unauthenticated` (a relayed chunk whose signature did not verify, see `signing.py`).

`WeightSubscriber` is the asyncio ZeroMQ DEALER around it: it connects to the learner's
publisher, registers (with its relay endpoint, a bound ROUTER), takes the chunks of each
version from one sender (the learner, or the server above it in the relay tree, as the
version's `route` says), forwards each verified chunk to the servers below it
(`relay.Fanout`), credits its sender, and for each complete update awaits the callback
(typically `engine.update_weights`, in its own task) and acks to the learner with the outcome. The publisher answers each registration
with the learner's version (`learner_version`); `current` is set once this server holds it, so
a server that joins mid-run can wait for the learner's weights before it generates.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import torch
import zmq
import zmq.asyncio

from agentgym_rl.auth import RefusalLog
from agentgym_rl.weights import schema
from agentgym_rl.weights.relay import Fanout
from agentgym_rl.weights.signing import Signer, Unauthenticated, peer_address

log = logging.getLogger(__name__)

ApplyFn = Callable[[int, dict[str, torch.Tensor]], Awaitable[Any]]


class UpdateRejected(Exception):
    """An update (or one of its chunks) was rejected; `reason` is the counted category."""

    def __init__(self, reason: str, detail: str, version: int | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.version = version


class _Pending:
    """An update being reassembled."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.version = int(header["version"])
        self.count = int(header["count"])
        self.digest_hex = str(header["digest"])
        self.total_bytes = int(header["total_bytes"])
        self.next_index = 0
        self.digest = hashlib.blake2b(digest_size=16)
        self.received = 0
        self.buffers: dict[str, bytearray] = {}
        self.meta: dict[str, tuple[str, list[int]]] = {}
        self.filled: dict[str, int] = {}
        self.last_chunk_at = time.monotonic()


class UpdateAssembler:
    """Turns an ordered stream of chunk messages into verified updates."""

    def __init__(self, last_version: int = -1) -> None:
        self.last_version = last_version
        self.rejections: Counter[str] = Counter()
        self._pending: _Pending | None = None
        self._dead_version: int | None = None  # chunks of a rejected update are skipped

    @property
    def in_progress(self) -> int | None:
        return None if self._pending is None else self._pending.version

    def reject(
        self, reason: str, detail: str, version: int | None = None, *, drop_pending: bool = True
    ) -> UpdateRejected:
        """Count and log a rejection; drops the partial update unless told otherwise."""
        self.rejections[reason] += 1
        if version is not None:
            self._dead_version = version
        if drop_pending:
            self._pending = None
        log.warning("weight update rejected (%s): %s", reason, detail)
        return UpdateRejected(reason, detail, version)

    def expire(self, now: float, chunk_timeout_s: float) -> UpdateRejected | None:
        """Reject the partial update if no chunk arrived for `chunk_timeout_s`."""
        p = self._pending
        if p is None or now - p.last_chunk_at < chunk_timeout_s:
            return None
        return self.reject(
            "incomplete",
            f"version {p.version}: timed out after chunk {p.next_index}/{p.count}",
            p.version,
        )

    def skip(self, version: int) -> None:
        """Drop the chunks of `version` silently (it is not newer: a duplicate)."""
        if version <= self.last_version:
            self._dead_version = version

    def restart(self, version: int) -> None:
        """`version` is sent again from its first chunk (a new sender: the learner or another
        relay took over): drop its partial copy, uncounted, and accept its chunks again."""
        if self._pending is not None and self._pending.version == version:
            self._pending = None
        if self._dead_version == version:
            self._dead_version = None

    def feed(
        self, frames: Sequence[Any], on_verified: Callable[[int], None] | None = None
    ) -> tuple[int, dict[str, torch.Tensor]] | None:
        """Consume one chunk message; returns the update once its last chunk verified.
        `on_verified(index)` runs as soon as the chunk's crc32 checked out (a relay forwards
        it then), before its bytes are placed."""
        try:
            header, data = schema.unpack(frames)
            version = int(header["version"])
            index, count = int(header["index"]), int(header["count"])
            pieces = header["pieces"]
            if header.get("kind") != "chunk" or not 0 <= index < count:
                raise schema.MalformedMessage(f"bad chunk header {header.get('kind')} {index}")
            if not isinstance(pieces, list) or len(pieces) != len(data):
                raise schema.MalformedMessage("piece table does not match the data frames")
        except (schema.MalformedMessage, KeyError, TypeError, ValueError) as exc:
            current = self._pending.version if self._pending is not None else None
            raise self.reject("malformed", str(exc), current) from None
        if version <= self.last_version:
            if self._dead_version != version:
                detail = f"version {version} <= {self.last_version}"
                raise self.reject("stale", detail, version, drop_pending=False)
            return None
        if version == self._dead_version:
            return None  # the rest of an update already rejected
        p = self._pending
        if p is not None and version != p.version:
            if version < p.version:
                detail = f"version {version} during {p.version}"
                raise self.reject("stale", detail, version, drop_pending=False)
            self.reject("incomplete", f"version {p.version} superseded by {version}", p.version)
            p = None
        if p is None:
            p = self._pending = _Pending(header)
        if index != p.next_index or count != p.count:
            raise self.reject(
                "out_of_order",
                f"version {version}: chunk {index}, expected {p.next_index}",
                version,
            )
        crc = 0
        for frame in data:
            crc = zlib.crc32(frame, crc)
        if crc != int(header["crc32"]):
            raise self.reject("checksum", f"version {version}: chunk {index} crc32", version)
        if on_verified is not None:
            on_verified(index)
        try:
            for meta, frame in zip(pieces, data, strict=True):
                self._place(p, meta, frame)
        except (schema.MalformedMessage, KeyError, TypeError, ValueError) as exc:
            raise self.reject("malformed", f"version {version}: {exc}", version) from None
        p.next_index += 1
        p.last_chunk_at = time.monotonic()
        if p.next_index < p.count:
            return None
        return self._finish(p)

    def _place(self, p: _Pending, meta: dict[str, Any], frame: memoryview) -> None:
        name, offset, nbytes = str(meta["name"]), int(meta["offset"]), int(meta["nbytes"])
        if nbytes != len(frame):
            raise schema.MalformedMessage(f"{name}: frame has {len(frame)} bytes, not {nbytes}")
        if name not in p.buffers:
            dtype = schema.dtype_from_name(str(meta["dtype"]))
            shape = [int(d) for d in meta["shape"]]
            size = dtype.itemsize
            for d in shape:
                size *= d
            p.buffers[name] = bytearray(size)
            p.meta[name] = (str(meta["dtype"]), shape)
            p.filled[name] = 0
        if offset != p.filled[name] or offset + nbytes > len(p.buffers[name]):
            raise schema.MalformedMessage(f"{name}: piece at {offset}+{nbytes} does not follow")
        p.buffers[name][offset : offset + nbytes] = frame
        p.filled[name] += nbytes
        p.digest.update(frame)
        p.received += nbytes

    def _finish(self, p: _Pending) -> tuple[int, dict[str, torch.Tensor]]:
        if p.digest.hexdigest() != p.digest_hex or p.received != p.total_bytes:
            raise self.reject("checksum", f"version {p.version}: whole-update digest", p.version)
        short = [n for n, buf in p.buffers.items() if p.filled[n] != len(buf)]
        if short:
            raise self.reject("incomplete", f"version {p.version}: partial {short[:3]}", p.version)
        tensors: dict[str, torch.Tensor] = {}
        for name, buf in p.buffers.items():
            dtype_name, shape = p.meta[name]
            dtype = schema.dtype_from_name(dtype_name)
            flat = torch.frombuffer(buf, dtype=torch.uint8) if buf else torch.empty(0)
            tensors[name] = flat.view(torch.uint8).view(dtype).reshape(shape)
        self._pending = None
        return p.version, tensors

    def applied(self, version: int) -> None:
        self.last_version = max(self.last_version, version)


_LEARNER = b""  # the source of messages read from the learner's socket
_TRANSPORT_REASONS = ("malformed", "checksum", "out_of_order", "incomplete", "unauthenticated")


def relay_bind_host(learner_endpoint: str, relay: str | None) -> str | None:
    """The host a subscriber binds its relay endpoint on: `relay` itself, or for "auto" the
    loopback when the learner is on loopback (one machine) and every interface otherwise (the
    learner then advertises the address it sees the server at). None: no relay."""
    if relay != "auto":
        return relay
    host = learner_endpoint.removeprefix("tcp://").rsplit(":", 1)[0]
    return "127.0.0.1" if host in ("127.0.0.1", "localhost", "[::1]") else "*"


class WeightSubscriber:
    """DEALER client of a `WeightPublisher`; applies updates through an async callback and
    relays each verified chunk to the children the learner's `route` names.

    Two sockets: the DEALER to the learner (register, ack, `relay_failed`; chunks when this
    server is fed by the learner) and a bound ROUTER, the relay endpoint, that a parent
    server's chunks arrive on (credits go back on it). Applying runs in its own task, so a
    slow engine update does not hold up relaying (a newer complete update replaces one still
    waiting to be applied)."""

    def __init__(
        self,
        endpoint: str,
        *,
        server_id: str | None = None,
        last_version: int = -1,
        chunk_timeout_s: float = 10.0,
        relay: str | None = "auto",
        secret: bytes | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._signer = Signer(secret)
        self.refusals = RefusalLog("weights (rollout server)")
        """Messages refused for want of a valid signature (`refusals.total`)."""
        self.server_id = server_id or f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"
        self.chunk_timeout_s = chunk_timeout_s
        self.assembler = UpdateAssembler(last_version)
        self.applied_versions: list[int] = []
        self.learner_version: int | None = None
        """The learner's version as of its last welcome (None: it has not answered yet)."""
        self.current = asyncio.Event()
        """Set once the learner answered and this server holds its version."""
        self.fanout = Fanout(self.server_id, signer=self._signer)
        self.relay_endpoint: str | None = None
        """Advertised relay endpoint (`tcp://:PORT`: the learner fills in the host it sees)."""
        self._ctx = zmq.asyncio.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.IDENTITY, self.server_id.encode())
        self._sock.connect(endpoint)
        self._poller = zmq.asyncio.Poller()
        self._poller.register(self._sock, zmq.POLLIN)
        self._relay_in: zmq.asyncio.Socket | None = None
        host = relay_bind_host(endpoint, relay)
        if host is not None:
            self._relay_in = self._ctx.socket(zmq.ROUTER)
            self._relay_in.setsockopt(zmq.LINGER, 0)
            self._relay_in.bind(f"tcp://{host}:0")
            port = self._relay_in.getsockopt_string(zmq.LAST_ENDPOINT).rsplit(":", 1)[1]
            shown = "" if host in ("*", "0.0.0.0") else host
            self.relay_endpoint = f"tcp://{shown}:{port}"
            self._poller.register(self._relay_in, zmq.POLLIN)
        self._feed: tuple[int, bytes] | None = None  # (version, source) chunks are taken from
        self._ready: tuple[int, dict[str, torch.Tensor]] | None = None
        self._wake = asyncio.Event()

    @property
    def rejections(self) -> Counter[str]:
        return self.assembler.rejections

    async def register(self) -> None:
        """Announce this server (done again after each reconnect by the caller)."""
        header = {"kind": "register", "server_id": self.server_id, "relay": self.relay_endpoint}
        await self._sock.send_multipart(
            self._signer.pack({**header, "version": self.assembler.last_version})
        )

    async def _ack(self, version: int, ok: bool, reason: str, seconds: float) -> None:
        header = {"kind": "ack", "server_id": self.server_id, "version": version, "ok": ok}
        await self._sock.send_multipart(
            self._signer.pack({**header, "reason": reason, "seconds": seconds})
        )

    async def step(self, timeout_s: float) -> None:
        """Handle the messages that arrive within `timeout_s` (returns after the first batch),
        move relayed chunks along and report stalled children."""
        busy = self.fanout.busy
        wait = min(timeout_s, 0.005 if busy else self.chunk_timeout_s)
        events = dict(await self._poller.poll(int(wait * 1000)))
        if self._sock in events:
            for _ in range(64):
                if not await self._sock.poll(0):
                    break
                frames = await self._sock.recv_multipart(copy=False)
                await self._on_message(frames, _LEARNER, self.endpoint)
        if self._relay_in is not None and self._relay_in in events:
            for _ in range(64):
                if not await self._relay_in.poll(0):
                    break
                frames = await self._relay_in.recv_multipart(copy=False)
                await self._on_message(frames[1:], frames[0].bytes, peer_address(frames[0]))
        for child in self.fanout.pump():
            header = {"kind": "relay_failed", "version": self.fanout.version, "child": child}
            await self._sock.send_multipart(
                self._signer.pack({**header, "server_id": self.server_id})
            )
        self.assembler.expire(time.monotonic(), self.chunk_timeout_s)

    async def _on_message(self, frames: Sequence[Any], source: bytes, peer: str) -> None:
        """One message from the learner or a relay; `frames` as received (forwarded as they
        are when they are a chunk, signature included)."""
        try:
            body = self._signer.open(frames)
        except Unauthenticated as exc:
            self.refusals.note(peer, str(exc))
            if source == _LEARNER:
                # Only the learner's publisher writes to this socket: the two processes hold
                # different secrets, which waiting cannot mend.
                raise Unauthenticated(
                    f"the learner's messages at {self.endpoint} fail authentication: {exc}; "
                    "give the learner and every rollout server the same secret"
                ) from None
            if self._feed is not None and self._feed[1] == source:
                # from the relay feeding this server: its copy of the version is unusable
                version = self._feed[0]
                await self._rejected(self.assembler.reject("unauthenticated", str(exc), version))
            return
        try:
            header, _ = schema.unpack(body)
            kind = header.get("kind")
        except schema.MalformedMessage:
            kind = None  # the assembler counts it
        if kind == "welcome" and source == _LEARNER:
            self._welcome(int(header.get("version", -1)))
        elif kind == "route":
            await self._route(header, source)
        else:
            await self._chunk(frames, body, header if kind == "chunk" else {}, source)

    async def _route(self, header: dict[str, Any], source: bytes) -> None:
        version = int(header.get("version", -1))
        if version <= self.assembler.last_version:
            # already applied (a relay's late copy, or the learner re-sending what it had not
            # seen acked yet): its chunks are skipped; the learner is told again
            self.assembler.skip(version)
            if source == _LEARNER and version in self.applied_versions:
                await self._ack(version, True, "", 0.0)
            return
        self._feed = (version, source)
        self.assembler.restart(version)
        children = header.get("children") or []
        self.fanout.start(version, children, float(header.get("stall_s", 5.0)))

    async def _chunk(
        self, frames: Sequence[Any], body: list[Any], header: dict[str, Any], source: bytes
    ) -> None:
        version = header.get("version")
        if isinstance(version, int):
            if self._feed is not None and self._feed[0] == version:
                if self._feed[1] != source:
                    return  # the rest from a sender that was replaced for this version
            elif version > self.assembler.last_version:
                self._feed = (version, source)  # no route first: a leaf fed directly
                self.fanout.start(version, [], self.fanout.stall_s)

        def verified(index: int) -> None:
            self.fanout.forward(frames)
            if source != _LEARNER and self._relay_in is not None:
                credit = self._signer.pack({"kind": "credit", "version": version, "index": index})
                with contextlib.suppress(zmq.Again):
                    self._relay_in.send_multipart([source, *credit], flags=zmq.NOBLOCK)

        try:
            update = self.assembler.feed(body, verified)
        except UpdateRejected as rej:
            await self._rejected(rej)
            return
        if update is not None:
            self._ready = update  # a newer update replaces one not yet applied
            self._wake.set()

    async def _rejected(self, rej: UpdateRejected) -> None:
        """Stop relaying a version whose copy failed in transit, and tell the learner (which
        sends this server the version itself)."""
        if rej.reason in _TRANSPORT_REASONS and rej.version == self.fanout.version:
            self.fanout.stop()  # nothing unverified goes on; the learner re-routes
        if rej.version is not None:
            await self._ack(rej.version, False, rej.reason, 0.0)

    async def _applier(self, apply: ApplyFn) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._ready is None:
                return  # stopped
            version, tensors = self._ready
            self._ready = None
            if version <= self.assembler.last_version:
                continue
            t0 = time.perf_counter()
            try:
                await apply(version, tensors)
            except Exception as exc:
                self.assembler.reject("apply_failed", f"version {version}: {exc!r}")
                await self._ack(version, False, "apply_failed", time.perf_counter() - t0)
                continue
            self.assembler.applied(version)
            self.applied_versions.append(version)
            self._check_current()
            await self._ack(version, True, "", time.perf_counter() - t0)

    def _welcome(self, version: int) -> None:
        if self.learner_version is None:
            log.info("weights: the learner is at version %d", version)
        self.learner_version = max(version, self.learner_version or -1)
        self._check_current()

    def _check_current(self) -> None:
        learner = self.learner_version
        # version 0 is the starting weights, which every server loads itself
        if learner is not None and max(self.assembler.last_version, 0) >= learner:
            self.current.set()

    async def serve(
        self, apply: ApplyFn, stop: asyncio.Event | None = None, *, reregister_s: float = 5.0
    ) -> None:
        """Register, then relay and apply updates until `stop` is set (or the task is
        cancelled); an update being applied when `stop` is set finishes first.

        Registration is repeated every `reregister_s`: a learner that restarted (its publisher
        forgot every server; ZeroMQ reconnects the socket by itself) learns of this server again
        within that time. A publisher ignores registrations of servers it knows."""
        applier = asyncio.create_task(self._applier(apply), name="weight-applier")
        try:
            await self.register()
            registered = time.monotonic()
            while stop is None or not stop.is_set():
                if applier.done():
                    applier.result()  # raises what stopped it
                await self.step(timeout_s=0.5)
                if time.monotonic() - registered >= reregister_s:
                    await self.register()
                    registered = time.monotonic()
        finally:
            self._ready = None
            self._wake.set()
            with contextlib.suppress(asyncio.CancelledError):
                await applier

    def close(self) -> None:
        self.fanout.close()
        self._sock.close(linger=0)
        if self._relay_in is not None:
            self._relay_in.close(linger=0)
