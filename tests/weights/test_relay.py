"""The relay tree with real processes and sockets: rollout servers (stand-ins running the real
`WeightSubscriber`, see `standin.py` beside this file) relay each update to each other, so the
learner sends one copy per tree root; corruption at a relay, a killed relay and a late joiner."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from standin import StandInModule

from agentgym_rl.auth import ENV_VAR
from agentgym_rl.weights.publisher import WeightPublisher, plan_tree
from agentgym_rl.weights.subscriber import WeightSubscriber, relay_bind_host

STANDIN = Path(__file__).with_name("standin.py")

pytestmark = pytest.mark.process


def _tensors(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "model.embed_tokens.weight": torch.randn(128, 64, generator=g),
        "model.layers.0.mlp.up_proj.weight": torch.randn(96, 64, generator=g),
        "model.layers.0.self_attn.q_proj.bias": torch.randn(64, generator=g).to(torch.bfloat16),
        "model.norm.weight": torch.ones(64),
    }


def _digest(tensors: dict[str, torch.Tensor]) -> str:
    module = StandInModule(tensors)
    module.load(tensors)
    return module.digest()


class StandIn:
    """One stand-in rollout server process; its JSON lines are collected by a thread."""

    def __init__(
        self, endpoint: str, server_id: str, *extra: str, secret: bytes | None = None
    ) -> None:
        self.id = server_id
        cmd = [sys.executable, str(STANDIN)]
        cmd += ["--endpoint", endpoint, "--id", server_id, *extra]
        env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
        if secret is not None:
            env[ENV_VAR] = secret.decode()  # as `train` hands it over
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.acks: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def ack(self, version: int, timeout_s: float = 30.0) -> dict[str, Any]:
        """Its (last) ack line of `version`."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = [a for a in self.acks if a["version"] == version]
            if found and found[-1]["ok"]:
                return found[-1]
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.id}: no ok ack of {version}: {found}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if "version" in line:
                self.acks.append(line)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def cluster() -> Iterator[Any]:
    made: list[Any] = []

    def make(
        n: int,
        fanout: int,
        *,
        stall_s: float = 5.0,
        extra: dict[int, list[str]] | None = None,
        secret: bytes | None = None,
    ) -> tuple[WeightPublisher, list[StandIn]]:
        pub = WeightPublisher(
            "tcp://127.0.0.1:0",
            chunk_bytes=4096,
            fanout=fanout,
            relay_stall_s=stall_s,
            secret=secret,
        )
        made.append(pub)
        servers = []
        for i in range(n):  # started together; `extra` ones register first, in order
            more = (extra or {}).get(i, [])
            servers.append(StandIn(pub.endpoint, f"s{i}", *more, secret=secret))
            made.append(servers[-1])
            if extra and i in extra:
                assert pub.wait_for_servers(i + 1, timeout_s=60) == i + 1
        assert pub.wait_for_servers(n, timeout_s=60) == n
        # the tree follows registration order
        by_id = {s.id: s for s in servers}
        return pub, [by_id[ident.decode()] for ident in pub.servers]

    yield make
    standins = [t for t in made if isinstance(t, StandIn)]
    for s in standins:  # all at once, then wait for each
        if s.proc.poll() is None:
            s.proc.terminate()
    for s in standins:
        s.stop()
    for pub in made:
        if isinstance(pub, WeightPublisher):
            pub.close()


def test_plan_tree_shapes() -> None:
    ids = [f"s{i}".encode() for i in range(7)]
    roots, children = plan_tree(ids, 2)
    assert roots == [b"s0", b"s1"]
    assert children[b"s0"] == [b"s2", b"s3"] and children[b"s1"] == [b"s4", b"s5"]
    assert children[b"s2"] == [b"s6"] and children[b"s6"] == []
    roots, children = plan_tree(ids, 7)  # star
    assert roots == ids and not any(children.values())
    roots, children = plan_tree(ids, 1)  # chain
    assert roots == [b"s0"] and all(children[ids[i]] == [ids[i + 1]] for i in range(6))


def test_a_tree_of_eight_gets_identical_weights_from_one_copy_per_root(cluster: Any) -> None:
    pub, servers = cluster(8, fanout=2)
    for version in (1, 2):
        tensors = _tensors(version)
        res = pub.publish(version, tensors, timeout_s=60)
        assert res.ok and sorted(res.acked) == sorted(s.id for s in servers), res
        assert res.roots == [s.id for s in servers[:2]] and res.depth == 3 and not res.rerouted
        # the learner's egress: one copy per root, not one per server
        assert res.bytes_sent == 2 * res.bytes_per_server
        acks = [s.ack(version) for s in servers]
        assert {a["digest"] for a in acks} == {_digest(tensors)}
        assert all(not a["rejections"] for a in acks)
    # in registration order: 0 -> 2, 3; 1 -> 4, 5; 2 -> 6, 7: three relays, two children each
    copy = res.bytes_per_server
    assert [a["forwarded_bytes"] for a in acks] == [4 * copy] * 3 + [0] * 5


SECRET = b"relay-test-secret-0123456789abcdef"


@pytest.mark.parametrize(
    ("secret", "damage", "caught_by"),
    [
        (None, [], "checksum"),  # a data byte: the chunk's crc32 no longer matches
        (SECRET, [], "checksum"),  # the same under the learner's signed header
        (SECRET, ["--corrupt-header"], "unauthenticated"),  # the header: its tag fails
    ],
)
def test_a_chunk_corrupted_at_a_relay_is_rejected_downstream_and_counted(
    cluster: Any, secret: bytes | None, damage: list[str], caught_by: str
) -> None:
    # a chain first -> mid -> last (registration order); first damages the second chunk it
    # relays; mid rejects it before relaying or placing anything of it
    pub, (first, mid, last) = cluster(
        3, fanout=1, extra={0: ["--corrupt-forward", "1", *damage]}, secret=secret
    )
    assert first.id == "s0"
    tensors = _tensors(1)
    res = pub.publish(1, tensors, timeout_s=60)
    # mid rejected first's copy; the learner sent mid (and through it last) the update itself
    assert res.ok and sorted(res.acked) == ["s0", "s1", "s2"], res
    assert res.retried == {mid.id: caught_by}
    assert res.bytes_sent == 2 * res.bytes_per_server
    good = {s.id: s.ack(1) for s in (first, mid, last)}
    bad = [a for a in mid.acks if a["version"] == 1 and not a["ok"]]
    assert good[mid.id]["rejections"] == {caught_by: 1}
    assert not good[last.id]["rejections"]  # an unverified chunk is never relayed
    assert {a["digest"] for a in good.values()} == {_digest(tensors)}
    assert [a["reason"] for a in bad] == [caught_by]


def test_a_killed_relay_is_bypassed_and_its_children_still_get_the_update(cluster: Any) -> None:
    pub, servers = cluster(7, fanout=2, stall_s=2.0)
    assert pub.publish(1, _tensors(1), timeout_s=60).ok
    # in registration order 0 -> 2 -> 6: kill the relay in the middle
    servers[2].stop(signal.SIGKILL)
    tensors = _tensors(2)
    res = pub.publish(2, tensors, timeout_s=30)
    alive = [s for i, s in enumerate(servers) if i != 2]
    assert sorted(res.acked) == sorted(s.id for s in alive), res
    assert servers[6].id in res.rerouted and servers[2].id.encode() not in pub.servers
    assert res.seconds < 30
    assert {s.ack(2)["digest"] for s in alive} == {_digest(tensors)}
    # the next update: s6 comes straight from the learner, then rejoins the tree
    for version in (3, 4):
        res = pub.publish(version, _tensors(version), timeout_s=30)
        assert res.ok and sorted(res.acked) == sorted(s.id for s in alive), res
        assert {s.ack(version)["digest"] for s in alive} == {_digest(_tensors(version))}
    assert res.bytes_sent == 2 * res.bytes_per_server and not res.rerouted


def test_a_late_joiner_catches_up_from_the_newest_weights(cluster: Any) -> None:
    pub, servers = cluster(3, fanout=1)
    for version in (1, 2):
        assert pub.publish(version, _tensors(version), timeout_s=60).ok
    sent = pub.bytes_sent
    late = StandIn(pub.endpoint, "late")
    try:
        deadline = time.monotonic() + 60
        while b"late" not in pub.servers or not pub.servers[b"late"].done:
            assert time.monotonic() < deadline, "the late server never caught up"
            pub.serve(0.05)
        assert late.ack(2)["digest"] == _digest(_tensors(2)) and pub.catch_ups == 1
        one_copy = pub.bytes_sent - sent  # the catch-up alone
        res = pub.publish(3, _tensors(3), timeout_s=60)
        assert res.ok and len(res.acked) == 4 and res.depth == 4
        assert one_copy == res.bytes_per_server == res.bytes_sent  # a chain: one copy
        assert {s.ack(3)["digest"] for s in [*servers, late]} == {_digest(_tensors(3))}
    finally:
        late.stop()


def test_relay_endpoints_bind_on_loopback_or_everywhere_and_are_advertised_as_seen() -> None:
    assert relay_bind_host("tcp://127.0.0.1:5557", "auto") == "127.0.0.1"
    assert relay_bind_host("tcp://localhost:5557", "auto") == "127.0.0.1"
    assert relay_bind_host("tcp://train-0:5557", "auto") == "*"
    assert relay_bind_host("tcp://train-0:5557", "10.0.0.5") == "10.0.0.5"
    assert relay_bind_host("tcp://train-0:5557", None) is None
    pub = WeightPublisher("tcp://127.0.0.1:0")

    async def main() -> None:
        everywhere = WeightSubscriber(pub.endpoint, server_id="any", relay="*")
        leaf = WeightSubscriber(pub.endpoint, server_id="leaf", relay=None)
        try:
            assert everywhere.relay_endpoint is not None
            assert everywhere.relay_endpoint.startswith("tcp://:")  # the learner fills the host
            assert leaf.relay_endpoint is None
            await everywhere.register()
            await leaf.register()
            assert pub.wait_for_servers(2, timeout_s=10) == 2
            port = everywhere.relay_endpoint.rsplit(":", 1)[1]
            assert pub.servers[b"any"].relay == f"tcp://127.0.0.1:{port}"
            assert pub.servers[b"leaf"].relay is None
        finally:
            everywhere.close()
            leaf.close()

    try:
        asyncio.run(main())
    finally:
        pub.close()


def test_servers_that_cannot_relay_are_fed_directly(cluster: Any) -> None:
    pub, servers = cluster(3, fanout=1, extra={0: ["--relay", "none"]})
    res = pub.publish(1, _tensors(1), timeout_s=60)
    # s0 relays nothing: the learner feeds it and the chain of the other two
    assert res.ok and sorted(res.roots) == ["s0", servers[1].id] and res.depth == 2
    assert res.bytes_sent == 2 * res.bytes_per_server
    assert {s.ack(1)["digest"] for s in servers} == {_digest(_tensors(1))}
