"""The native ZeroMQ protocol: a ROUTER socket speaking msgpack, with batched requests.

Every request is one msgpack map `{"op": ..., "req": <any>, ...fields}`; the reply echoes `req`
and carries either `"ok": true` plus the result fields or `"ok": false` with `error` and `code`.
`{"op": "batch", "ops": [...]}` runs many requests in order and answers with one result per
item, so one bad item never fails the others. Clients may be DEALER (one payload frame) or REQ
(an empty delimiter frame before the payload); the reply uses the same envelope. Exact schema:
PROTOCOL.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from typing import Any

import msgpack
import zmq
import zmq.asyncio

from agentgym_envs.server.base import EnvError, ErrorCode
from agentgym_envs.server.latency import StepLatency, count_steps
from agentgym_envs.server.table import EpisodeTable, dispatch

log = logging.getLogger("agentgym_envs.server")

MAX_BATCH = 4096


def _error(err: EnvError) -> dict[str, Any]:
    return {"ok": False, "error": err.message, "code": err.code.value}


def _result(table: EpisodeTable, request: Mapping[str, Any]) -> dict[str, Any]:
    """One request's reply body (without `req`)."""
    op = request.get("op")
    if not isinstance(op, str):
        return _error(EnvError(ErrorCode.BAD_REQUEST, "missing or non-string field 'op'"))
    try:
        if op == "batch":
            return {"ok": True, "results": _batch(table, request.get("ops"))}
        value = dispatch(table, op, request)
    except EnvError as err:
        return _error(err)
    if op == "observation":
        return {"ok": True, "observation": value}
    if op == "available_actions":
        return {"ok": True, "actions": value}
    return {"ok": True, **value}


def _batch(table: EpisodeTable, ops: Any) -> list[dict[str, Any]]:
    if not isinstance(ops, list):
        raise EnvError(ErrorCode.BAD_REQUEST, "field 'ops' must be a list of request maps")
    if len(ops) > MAX_BATCH:
        raise EnvError(ErrorCode.BAD_REQUEST, f"batch of {len(ops)} ops is over {MAX_BATCH}")
    results: list[dict[str, Any]] = []
    _prefetch(table, ops)
    try:
        for item in ops:
            if not isinstance(item, dict):
                results.append(_error(EnvError(ErrorCode.BAD_REQUEST, "batch item must be a map")))
            elif item.get("op") == "batch":
                results.append(_error(EnvError(ErrorCode.BAD_REQUEST, "batches do not nest")))
            else:
                results.append(_result(table, item))
    finally:
        _prefetch(table, [])  # results are for this batch only
    return results


def _prefetch(table: EpisodeTable, ops: list[Any]) -> None:
    """Hand the batch's step actions to the env at once (`Environment.prefetch`); a failure
    there only costs speed: each step then does its own work."""
    actions = [
        item["action"]
        for item in ops
        if isinstance(item, dict)
        and item.get("op") == "step"
        and isinstance(item.get("action"), str)
    ]
    try:
        table.env.prefetch(actions)
    except Exception:
        log.exception("prefetch raised; the batch's steps run one by one")


def _is_health(payload: bytes) -> bool:
    """Whether `payload` is a health probe (answered at once, without the env)."""
    try:
        request = msgpack.unpackb(payload, raw=False)
    except Exception:
        return False
    return isinstance(request, dict) and request.get("op") in ("health", "ping")


def handle_payload(table: EpisodeTable, payload: bytes) -> bytes:
    """Decode one request, run it, encode the reply. Never raises."""
    req: Any = None
    try:
        request = msgpack.unpackb(payload, raw=False)
    except Exception as exc:
        reply = _error(EnvError(ErrorCode.BAD_REQUEST, f"malformed msgpack: {exc}"))
    else:
        if isinstance(request, dict):
            req = request.get("req")
            reply = _result(table, request)
        else:
            reply = _error(EnvError(ErrorCode.BAD_REQUEST, "request must be a msgpack map"))
    reply["req"] = req
    try:
        return msgpack.packb(reply, use_bin_type=True)
    except (TypeError, ValueError):  # an unencodable `req` echo
        reply["req"] = None
        return msgpack.packb(reply, use_bin_type=True)


class ZmqFrontend:
    """Serves `handle_payload` on a ROUTER socket from the shared event loop."""

    def __init__(
        self, table: EpisodeTable, host: str, port: int, latency: StepLatency | None = None
    ) -> None:
        self.table = table
        self.latency = latency
        self._tasks: set[asyncio.Task[None]] = set()
        self.ctx = zmq.asyncio.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(f"tcp://{host}:{port}")

    async def run(self) -> None:
        while True:
            frames = await self.sock.recv_multipart(copy=True)
            if len(frames) < 2:
                continue
            identity, rest = frames[0], frames[1:]
            envelope = rest[:-1]  # [] from DEALER, [b""] from REQ
            head, payload = [identity, *envelope], rest[-1]
            if self.table.blocking and not _is_health(payload):
                # runs on the env's thread (in arrival order); health probes overtake it
                self._spawn(self._answer(head, payload))
            elif self.latency is not None:
                # The step runs now; only its reply is held back, in its own task.
                self._spawn(self._reply_later(head, handle_payload(self.table, payload), payload))
            else:
                await self._reply(head, handle_payload(self.table, payload))
            await asyncio.sleep(0)  # let HTTP requests interleave under heavy ZMQ load

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, head: list[bytes], payload: bytes) -> None:
        reply = await self.table.run(handle_payload, self.table, payload)
        if self.latency is not None:
            await self._reply_later(head, reply, payload)
        else:
            await self._reply(head, reply)

    async def _reply(self, head: list[bytes], reply: bytes) -> None:
        try:
            await self.sock.send_multipart([*head, reply])
        except zmq.ZMQError as exc:  # peer gone: drop the reply
            log.debug("reply dropped: %s", exc)

    async def _reply_later(self, head: list[bytes], reply: bytes, payload: bytes) -> None:
        assert self.latency is not None
        try:
            steps = count_steps(msgpack.unpackb(payload, raw=False))
        except Exception:
            steps = 0
        await self.latency.wait(steps)
        await self._reply(head, reply)

    def close(self) -> None:
        self.sock.close(linger=0)
        self.ctx.term()
