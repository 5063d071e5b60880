"""Weight stream without vLLM: chunking, reassembly, every rejection path, publish/ack over TCP."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
import torch
import zmq

from agentgym_rl.weights import schema
from agentgym_rl.weights.publisher import WeightPublisher
from agentgym_rl.weights.signing import MAGIC_SIGNED, Signer, Unauthenticated
from agentgym_rl.weights.subscriber import UpdateAssembler, UpdateRejected, WeightSubscriber


def _tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "model.embed_tokens.weight": torch.randn(64, 32, generator=g),
        "model.layers.0.self_attn.q_proj.bias": torch.randn(32, generator=g).to(torch.bfloat16),
        "model.layers.0.mlp.down_proj.weight": torch.randn(16, 48, generator=g),
        "model.norm.weight": torch.ones(32),
        "counter": torch.arange(5, dtype=torch.int64),
        "empty": torch.empty(0, 4),
    }


def _messages(version: int, tensors: dict[str, torch.Tensor], chunk_bytes: int) -> list[list]:
    chunks = schema.plan_chunks(version, list(tensors.items()), chunk_bytes)
    return [[bytes(f) for f in schema.pack(c.header, c.frames)] for c in chunks]


def _feed_all(asm: UpdateAssembler, messages: list[list]) -> tuple[int, dict] | None:
    out = None
    for m in messages:
        out = asm.feed(m) or out
    return out


@pytest.mark.parametrize("chunk_bytes", [1000, 1 << 20])
def test_roundtrip_exact(chunk_bytes: int) -> None:
    tensors = _tensors()
    messages = _messages(3, tensors, chunk_bytes)
    assert (len(messages) > 5) == (chunk_bytes == 1000)  # tensors span chunks when small
    asm = UpdateAssembler()
    update = _feed_all(asm, messages)
    assert update is not None and update[0] == 3
    got = update[1]
    assert got.keys() == tensors.keys()
    for name, t in tensors.items():
        assert got[name].dtype == t.dtype and got[name].shape == t.shape
        assert torch.equal(got[name], t)
    assert not asm.rejections


def _header(msg: list) -> dict[str, Any]:
    return msgpack.unpackb(msg[1])


def _with_header(msg: list, **changes: Any) -> list:
    return [msg[0], msgpack.packb({**_header(msg), **changes}), *msg[2:]]


def _reject(asm: UpdateAssembler, messages: list[list]) -> UpdateRejected:
    with pytest.raises(UpdateRejected) as info:
        _feed_all(asm, messages)
    return info.value


def test_corruptions_rejected_and_counted() -> None:
    good = _messages(1, _tensors(), 1000)
    n = len(good)
    flipped = [*good[1][:2], bytes([good[1][2][0] ^ 1]) + good[1][2][1:], *good[1][3:]]
    cases = {
        "malformed": [[b"XXXX", *good[0][1:]]],
        "checksum": [good[0], flipped],
        "out_of_order": [good[0], good[2]],
    }
    for reason, msgs in cases.items():
        asm = UpdateAssembler()
        assert _reject(asm, msgs).reason == reason
        assert asm.rejections == {reason: 1}
        assert asm.in_progress is None and asm.last_version == -1
    # Non-msgpack header, wrong schema, piece table vs frames, a piece that does not follow.
    for bad in (
        [schema.MAGIC, b"\xc1garbage", *good[0][2:]],
        _with_header(good[0], schema=99),
        good[0][:-1],
        _with_header(good[0], pieces=[{**_header(good[0])["pieces"][0], "offset": 8}]),
    ):
        asm = UpdateAssembler()
        assert _reject(asm, [bad]).reason == "malformed"
    # Whole-update digest: every chunk checks out, the sum does not.
    asm = UpdateAssembler()
    forged = [_with_header(m, digest="00" * 16) for m in good]
    assert _reject(asm, forged).reason == "checksum"
    # Old version after an applied one; the rest of that stale update is skipped silently.
    asm = UpdateAssembler(last_version=1)
    assert _reject(asm, good[:1]).reason == "stale"
    assert asm.feed(good[1]) is None and asm.rejections == {"stale": 1}
    # A new version while one is half done: the old one is incomplete, the new one applies.
    asm = UpdateAssembler()
    newer = _messages(2, _tensors(seed=1), 1000)
    assert _feed_all(asm, good[: n - 1]) is None
    update = _feed_all(asm, newer)
    assert update is not None and update[0] == 2 and asm.rejections == {"incomplete": 1}
    # Timeout mid-update.
    asm = UpdateAssembler()
    asm.feed(good[0])
    assert asm.expire(now=1e12, chunk_timeout_s=1.0) is not None
    assert asm.rejections == {"incomplete": 1} and asm.in_progress is None


class LoopThread:
    """An asyncio loop in a thread (subscribers live on it, the publisher stays sync)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def spawn(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def loop() -> Iterator[LoopThread]:
    lt = LoopThread()
    yield lt
    lt.close()


class Server:
    """A subscriber with a recording apply callback (optionally slow or failing)."""

    def __init__(
        self,
        loop: LoopThread,
        endpoint: str,
        name: str,
        secret: bytes | None = None,
        reregister_s: float = 5.0,
    ) -> None:
        self.loop = loop
        self.applied: dict[int, dict[str, torch.Tensor]] = {}
        self.delay_s = 0.0
        self.fail = False

        async def make() -> tuple[WeightSubscriber, asyncio.Event]:
            sub = WeightSubscriber(endpoint, server_id=name, secret=secret)
            return sub, asyncio.Event()

        self.sub, self.stop = loop.run(make())
        self.task = loop.spawn(self.sub.serve(self.apply, self.stop, reregister_s=reregister_s))

    async def apply(self, version: int, tensors: dict[str, torch.Tensor]) -> None:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("engine refused")
        self.applied[version] = tensors

    def close(self) -> None:
        self.loop.loop.call_soon_threadsafe(self.stop.set)
        self.task.result(5)
        self.sub.close()


def registered_again(pub: WeightPublisher, ident: bytes, times: int) -> None:
    """Serve `pub` until server `ident` has registered `times` more times."""
    target = pub.servers[ident].registrations + times
    deadline = time.monotonic() + 20
    while pub.servers[ident].registrations < target:
        assert time.monotonic() < deadline, "the server stopped re-registering"
        pub.serve(0.05)


def test_publish_to_two_servers_with_slow_and_failing(loop: LoopThread) -> None:
    pub = WeightPublisher("tcp://127.0.0.1:0", chunk_bytes=4096)
    a, b = Server(loop, pub.endpoint, "a"), Server(loop, pub.endpoint, "b")
    try:
        assert pub.wait_for_servers(2, timeout_s=10) == 2
        v1 = _tensors(1)
        res = pub.publish(1, v1, timeout_s=20)
        assert res.ok and sorted(res.acked) == ["a", "b"] and res.chunks > 1
        for server in (a, b):
            assert torch.equal(server.applied[1]["model.embed_tokens.weight"], v1[next(iter(v1))])
        # b is slow: publish returns at its timeout, never later; b catches up at version 3.
        # (a's ack has a loaded machine's second and more; b's apply outlasts the timeout twice)
        b.delay_s = 4.0
        res = pub.publish(2, _tensors(2), timeout_s=1.5)
        assert res.acked == ["a"] and res.timed_out == ["b"] and res.seconds < 3.0
        b.delay_s = 0.0
        res = pub.publish(3, _tensors(3), timeout_s=20)
        assert res.ok and sorted(res.acked) == ["a", "b"]
        assert sorted(b.applied) == [1, 2, 3]  # 2 finished late, then 3
        # a failing apply is reported with its reason; a's weights stay at version 3.
        a.fail = True
        res = pub.publish(4, _tensors(4), timeout_s=20)
        assert res.failed == {"a": "apply_failed"} and res.acked == ["b"]
        assert a.sub.rejections["apply_failed"] == 1 and max(a.applied) == 3
        with pytest.raises(ValueError):
            pub.publish(4, _tensors(4), timeout_s=1)
    finally:
        a.close()
        b.close()
        pub.close()


def test_corrupt_chunk_over_tcp_is_nacked(loop: LoopThread) -> None:
    pub = WeightPublisher("tcp://127.0.0.1:0", chunk_bytes=2048)
    s = Server(loop, pub.endpoint, "s")
    try:
        assert pub.wait_for_servers(1, timeout_s=10) == 1
        good = _messages(1, _tensors(), 2048)
        bad = [*good[0][:2], b"\x00" * len(good[0][2]), *good[0][3:]]
        for m in [bad, *good[1:]]:
            pub._sock.send_multipart([b"s", *m])
        assert pub._sock.poll(10_000)
        header, _ = schema.unpack(pub._sock.recv_multipart()[1:])
        assert header["kind"] == "ack" and not header["ok"] and header["reason"] == "checksum"
        assert s.sub.rejections == {"checksum": 1} and not s.applied
        # The next good version goes through.
        res = pub.publish(2, _tensors(), timeout_s=20)
        assert res.acked == ["s"] and list(s.applied) == [2]
    finally:
        s.close()
        pub.close()


def test_a_restarted_publisher_relearns_its_servers(loop: LoopThread, free_port: int) -> None:
    """A learner that restarts forgets every rollout server; their periodic re-registration
    (every 5 s by default, 0.2 s here) brings them back without restarting them, and updates
    flow again."""
    endpoint = f"tcp://127.0.0.1:{free_port}"
    first = WeightPublisher(endpoint, chunk_bytes=4096)
    server = Server(loop, endpoint, "a", reregister_s=0.2)
    try:
        assert first.wait_for_servers(1, timeout_s=10) == 1
        assert first.publish(1, _tensors(1), timeout_s=20).ok
        assert first.publish(1 + 1, _tensors(2), timeout_s=20).acked == ["a"]
        first.close()
        second = WeightPublisher(endpoint, chunk_bytes=4096)
        try:
            assert second.wait_for_servers(1, timeout_s=15) == 1
            res = second.publish(3, _tensors(3), timeout_s=20)
            assert res.acked == ["a"] and sorted(server.applied) == [1, 2, 3]
            # known servers re-registering change nothing: no duplicate, version kept
            registered_again(second, b"a", times=3)
            assert len(second.servers) == 1 and second.servers[b"a"].version == 3
        finally:
            second.close()
    finally:
        server.close()


def test_bind_waits_briefly_for_a_port_being_released(free_port: int) -> None:
    """A port freed a moment later (zmq closes sockets on its I/O thread) is bound; a port that
    stays taken still fails, with zmq's "address in use"."""
    import zmq

    endpoint = f"tcp://127.0.0.1:{free_port}"
    holder = zmq.Context.instance().socket(zmq.ROUTER)
    holder.bind(endpoint)
    releaser = threading.Timer(0.3, lambda: holder.close(linger=0))
    releaser.start()
    publisher = WeightPublisher(endpoint)
    try:
        assert publisher.endpoint == endpoint
        started = time.monotonic()
        with pytest.raises(zmq.ZMQError) as err:
            WeightPublisher(endpoint)
        assert err.value.errno == zmq.EADDRINUSE and time.monotonic() - started >= 1.5
    finally:
        releaser.join()
        publisher.close()


def test_a_server_joining_mid_run_gets_the_current_weights_before_it_is_current(
    loop: LoopThread,
) -> None:
    """A rollout server restarted at the base weights (or started by `train --resume`) is sent
    the learner's last update by `serve` alone: the learner, which may be waiting for groups
    that server cannot usefully make, needs no new step to publish."""
    pub = WeightPublisher("tcp://127.0.0.1:0", chunk_bytes=4096)
    early = Server(loop, pub.endpoint, "early")
    late: Server | None = None
    try:
        assert pub.wait_for_servers(1, timeout_s=10) == 1
        assert pub.publish(1, _tensors(1), timeout_s=20).ok
        v2 = _tensors(2)
        assert pub.publish(2, v2, timeout_s=20).ok
        late = Server(loop, pub.endpoint, "late", reregister_s=0.2)
        deadline = time.monotonic() + 20
        while not (late.applied and loop.run(_is_set(late.sub.current))):
            assert time.monotonic() < deadline, "the late server never caught up"
            pub.serve(0.05)
        assert list(late.applied) == [2] and late.sub.learner_version == 2
        name = next(iter(v2))
        assert torch.equal(late.applied[2][name], v2[name])
        while pub.servers[b"late"].version != 2:  # its ack
            assert time.monotonic() < deadline, "no ack of the catch-up"
            pub.serve(0.05)
        assert pub.catch_ups == 1
        assert list(early.applied) == [1, 2]  # the server that was current got nothing again
        # its periodic re-registration changes nothing once it is current
        registered_again(pub, b"late", times=3)
        assert pub.serve(0.1) is False and pub.catch_ups == 1 and list(late.applied) == [2]
    finally:
        for s in (early, late):
            if s is not None:
                s.close()
        pub.close()


def test_a_fresh_learner_welcomes_servers_at_version_0(loop: LoopThread) -> None:
    pub = WeightPublisher("tcp://127.0.0.1:0", chunk_bytes=4096)
    pub.announce(0)
    s = Server(loop, pub.endpoint, "s")
    try:
        deadline = time.monotonic() + 10
        while not loop.run(_is_set(s.sub.current)):
            assert time.monotonic() < deadline
            pub.serve(0.05)
        assert s.sub.learner_version == 0 and not s.applied and pub.catch_ups == 0
    finally:
        s.close()
        pub.close()


async def _is_set(event: asyncio.Event) -> bool:
    return event.is_set()


SECRET = b"weights-test-secret-0123456789abc"


def test_signed_messages_open_only_under_the_same_secret() -> None:
    signer, other, plain = Signer(SECRET), Signer(SECRET[::-1]), Signer(None)
    data = [memoryview(b"abc"), b"defg"]
    frames = signer.pack({"kind": "chunk", "version": 1}, data)
    assert frames[0] == MAGIC_SIGNED and len(frames[-1]) == 32
    opened = signer.open(frames)
    assert schema.unpack(opened)[0]["version"] == 1
    assert [bytes(f) for f in schema.unpack(opened)[1]] == [b"abc", b"defg"]
    assert signer.data_bytes(frames) == plain.data_bytes(plain.pack({}, data)) == 7
    with pytest.raises(Unauthenticated, match="another secret"):
        other.open(frames)
    with pytest.raises(Unauthenticated, match="not signed"):
        signer.open(plain.pack({"kind": "chunk"}, data))
    with pytest.raises(Unauthenticated, match="this side has no secret"):
        plain.open(frames)
    # The header is covered byte for byte, the data frames by their lengths (their bytes by
    # the header's checksums, which the assembler checks).
    forged_header = [frames[0], msgpack.packb({"schema": 1, "kind": "chunk", "version": 2})]
    with pytest.raises(Unauthenticated):
        signer.open([*forged_header, *frames[2:]])
    with pytest.raises(Unauthenticated):
        signer.open([*frames[:2], b"abcd", *frames[3:]])
    same_length = signer.open([*frames[:2], b"abd", *frames[3:]])
    assert bytes(same_length[2]) == b"abd"  # caught by the chunk's crc32, see above


def test_a_signed_stream_refuses_strangers_and_names_them(loop: LoopThread) -> None:
    pub = WeightPublisher("tcp://127.0.0.1:0", chunk_bytes=4096, secret=SECRET)
    good = Server(loop, pub.endpoint, "good", secret=SECRET)
    # A process without the secret registers, then one with another secret.
    rogue = zmq.Context.instance().socket(zmq.DEALER)
    rogue.setsockopt(zmq.LINGER, 0)
    rogue.setsockopt(zmq.IDENTITY, b"rogue")
    rogue.connect(pub.endpoint)
    try:
        rogue.send_multipart(Signer(None).pack({"kind": "register", "server_id": "rogue"}))
        rogue.send_multipart(Signer(b"x" * 32).pack({"kind": "register", "server_id": "rogue"}))
        assert pub.wait_for_servers(2, timeout_s=3) == 1  # the rogue never registers
        assert pub.refusals.total == 2
        res = pub.publish(1, _tensors(1), timeout_s=20)
        assert res.ok and res.acked == ["good"]
        assert torch.equal(good.applied[1]["model.norm.weight"], _tensors(1)["model.norm.weight"])
        assert good.sub.refusals.total == 0
    finally:
        rogue.close()
        good.close()
        pub.close()


def test_a_server_holding_another_secret_stops_with_the_reason(loop: LoopThread) -> None:
    pub = WeightPublisher("tcp://127.0.0.1:0", secret=SECRET)
    stray = Server(loop, pub.endpoint, "stray", secret=SECRET[::-1])
    try:
        deadline = time.monotonic() + 10
        while not stray.task.done():
            assert time.monotonic() < deadline, "the subscriber kept waiting"
            pub.serve(0.05)  # answers the register with a welcome the server cannot verify
        with pytest.raises(Unauthenticated, match="same secret"):
            stray.task.result(0)
        assert pub.refusals.total >= 1 and not pub.servers
    finally:
        stray.sub.close()
        pub.close()
