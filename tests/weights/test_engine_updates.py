"""Publisher -> subscriber -> VllmEngine over tcp 127.0.0.1; rejected updates keep old weights."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import torch

from agentgym_rl.weights import schema
from agentgym_rl.weights.publisher import WeightPublisher
from agentgym_rl.weights.subscriber import WeightSubscriber
from vllm_fixtures import EngineHandle

pytestmark = pytest.mark.engine

PROMPT = [1, 11, 22, 33, 44]


class Wired:
    """A publisher in this thread, a subscriber on the engine's loop applying to the engine."""

    def __init__(self, handle: EngineHandle) -> None:
        self.handle = handle
        self.pub = WeightPublisher("tcp://127.0.0.1:0", chunk_bytes=64 << 10)
        eng = handle.engine

        async def make() -> tuple[WeightSubscriber, asyncio.Event]:
            sub = WeightSubscriber(self.pub.endpoint, server_id="rollout-0")
            sub.assembler.last_version = eng.version
            return sub, asyncio.Event()

        self.sub, self.stop = handle.run(make())
        self.task = asyncio.run_coroutine_threadsafe(
            self.sub.serve(self.apply, self.stop), handle.loop
        )
        assert self.pub.wait_for_servers(1, timeout_s=10) == 1

    async def apply(self, version: int, tensors: dict[str, torch.Tensor]) -> None:
        await self.handle.engine.update_weights(version, tensors)
        self.handle.committed(version, tensors)

    def probe(self, tag: str) -> tuple[list[int], list[float]]:
        eng = self.handle.engine
        g = self.handle.run(eng.generate(PROMPT, max_tokens=24, request_id=tag, seed=17))
        return g.token_ids, g.logprobs

    def send_raw(self, messages: list[list[bytes]]) -> dict:
        for m in messages:
            self.pub._sock.send_multipart([b"rollout-0", *m])
        assert self.pub._sock.poll(30_000)
        header, _ = schema.unpack(self.pub._sock.recv_multipart()[1:])
        return header

    def send_raw_no_ack(self, messages: list[list[bytes]]) -> None:
        for m in messages:
            self.pub._sock.send_multipart([b"rollout-0", *m])

    def close(self) -> None:
        self.handle.loop.call_soon_threadsafe(self.stop.set)
        self.task.result(10)
        self.sub.close()
        self.pub.close()


@pytest.fixture
def wired(vllm_engine: EngineHandle) -> Iterator[Wired]:
    w = Wired(vllm_engine)
    yield w
    w.close()


def _messages(version: int, tensors: dict[str, torch.Tensor]) -> list[list[bytes]]:
    chunks = schema.plan_chunks(version, list(tensors.items()), 64 << 10)
    return [[bytes(f) for f in schema.pack(c.header, c.frames)] for c in chunks]


def test_stream_roundtrip_applies_to_engine(wired: Wired) -> None:
    handle, eng = wired.handle, wired.handle.engine
    before = wired.probe("before")
    version = eng.version + 1
    new = handle.perturbed(seed=21, scale=0.1)
    res = wired.pub.publish(version, new, timeout_s=60)
    assert res.ok and res.acked == ["rollout-0"] and res.chunks > 1
    assert eng.version == version and wired.sub.applied_versions == [version]
    ids, lps = wired.probe("after")
    assert lps != before[1]
    ref = handle.reference_logprobs(PROMPT, ids)
    assert max(abs(a - b) for a, b in zip(lps, ref, strict=True)) < 1e-4


def test_bad_updates_rejected_and_old_weights_stay(wired: Wired) -> None:
    eng = wired.handle.engine
    v0, applied0 = eng.version, eng.updates_applied
    before = wired.probe("keep-0")
    new = wired.handle.perturbed(seed=31, scale=0.5)

    def corrupt(good: list[list[bytes]]) -> list[list[bytes]]:
        return [good[0], [*good[1][:2], bytes(len(good[1][2])), *good[1][3:]], *good[2:]]

    # Each case is its own version: chunks of an update already rejected are skipped.
    cases = {
        "checksum": corrupt(_messages(v0 + 1, new)),
        "out_of_order": [m for i, m in enumerate(_messages(v0 + 2, new)) if i != 1],
    }
    for reason, messages in cases.items():
        assert len(messages) >= 2
        header = wired.send_raw(messages)
        assert not header["ok"] and header["reason"] == reason
        assert eng.version == v0
    # A malformed message carries no trustworthy version and is not acked; an old version is.
    good = _messages(v0 + 3, new)
    wired.pub._sock.send_multipart([b"rollout-0", good[0][0], b"\xc1", *good[0][2:]])
    header = wired.send_raw(_messages(v0, new)[:1])
    assert header["reason"] == "stale" and header["version"] == v0
    # Timeout mid-update: half an update, then silence longer than chunk_timeout_s.
    wired.sub.chunk_timeout_s = 0.2
    wired.send_raw_no_ack(good[:1])
    wired.handle.run(asyncio.sleep(0.6))
    assert wired.sub.rejections == {
        "checksum": 1,
        "out_of_order": 1,
        "malformed": 1,
        "stale": 1,
        "incomplete": 1,
    }
    assert eng.version == v0 and eng.updates_applied == applied0
    assert wired.probe("keep-1") == before
    # The engine is still fine: the next intact update applies.
    res = wired.pub.publish(v0 + 4, new, timeout_s=60)
    assert res.ok and eng.version == v0 + 4
    assert wired.probe("keep-2") != before
