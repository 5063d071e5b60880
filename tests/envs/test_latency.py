"""Injected step latency: replies are delayed, other episodes are not held up meanwhile."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import msgpack
import zmq
from tests.envs.conftest import ServerProc

from agentgym_envs.server.latency import StepLatency, count_steps


def test_latency_model_is_seeded_and_log_normal() -> None:
    a, b = StepLatency(100, sigma=1.0, seed=3), StepLatency(100, sigma=1.0, seed=3)
    assert [a.sample_s() for _ in range(5)] == [b.sample_s() for _ in range(5)]
    assert StepLatency(100, sigma=0.0).sample_s() == 0.1
    model = StepLatency(100, sigma=1.0)
    samples = sorted(model.sample_s() for _ in range(2001))
    assert 0.08 < samples[1000] < 0.12  # median
    assert samples[-20] > 0.5  # a long tail
    assert (
        count_steps({"op": "batch", "ops": [{"op": "step"}, {"op": "reset"}, {"op": "step"}]}) == 2
    )


def test_delayed_steps_overlap_across_episodes(spawn: Callable[..., ServerProc]) -> None:
    server = spawn("noop", "--step-latency-ms", "1000", "--step-latency-sigma", "0")
    ids = [server.post("/create")["id"] for _ in range(4)]
    for i in ids:
        server.post("/reset", {"id": i, "data_idx": 0})

    # HTTP: four concurrent steps take one delay, not four (the margins leave a loaded machine
    # seconds of slack and still tell 1 s from the 4 s of steps in series).
    t0 = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda i: server.post("/step", {"id": i, "action": "x"}), ids))
    http_s = time.monotonic() - t0
    assert all("observation" in r for r in replies)
    assert 0.99 <= http_s < 3.0

    # ZeroMQ: requests from four DEALERs are delayed independently too.
    ctx = zmq.Context()
    socks = []
    try:
        for _ in ids:
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.RCVTIMEO, 10_000)
            s.connect(f"tcp://127.0.0.1:{server.zmq_port}")
            socks.append(s)
        t0 = time.monotonic()
        for s, i in zip(socks, ids, strict=True):
            s.send(msgpack.packb({"op": "step", "id": i, "action": "x"}))
        out = [msgpack.unpackb(s.recv(), raw=False) for s in socks]
        zmq_s = time.monotonic() - t0
    finally:
        for s in socks:
            s.close()
        ctx.term()
    assert all(r["ok"] for r in out)
    assert 0.99 <= zmq_s < 3.0

    # Non-step requests are not delayed (a delayed one would take the full second).
    t0 = time.monotonic()
    server.get("/health")
    assert time.monotonic() - t0 < 0.6
