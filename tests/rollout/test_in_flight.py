"""In-flight sizing (`buffer.in_flight: auto`): Little's law on measured shares, the metrics'
time integrals it reads, the buffer's settable cap, and the dispatcher resizing a real loop."""

from __future__ import annotations

import asyncio
import math

import pytest
from harness import ScriptedEngine, receive_groups
from test_dispatcher import NOOP, build, finish

from agentgym_rl import _core
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.rollout.in_flight import NO_TOTALS, EngineTotals, InFlightSizer


def test_the_cap_fills_the_engine_s_batch_by_little_s_law() -> None:
    sizer = InFlightSizer(group_size=4, floor=2, ceiling=100, target=64, smoothing=0.0)
    assert sizer.first == 16  # as if every episode were always in the engine: 64 / 4
    # episodes in the engine a quarter of their life: 64 / 0.25 = 256 episodes, 64 groups
    assert sizer.size(request_seconds=25.0, episode_seconds=100.0) == 64
    assert sizer.size(request_seconds=90.0, episode_seconds=100.0) == 18  # ceil(71.1 / 4)
    assert sizer.size(request_seconds=1.0, episode_seconds=100.0) == 100  # the ceiling holds
    assert sizer.size(request_seconds=0.0, episode_seconds=100.0) == 100  # none in the engine
    assert sizer.size(request_seconds=5.0, episode_seconds=0.0) is None  # nothing measured


def test_the_floor_holds_and_the_share_is_smoothed() -> None:
    sizer = InFlightSizer(group_size=4, floor=8, ceiling=100, target=4, smoothing=0.5)
    assert sizer.size(10.0, 10.0) == 8  # one episode's worth of groups would do: the floor
    sizer = InFlightSizer(group_size=1, floor=1, ceiling=1000, target=10, smoothing=0.5)
    assert sizer.size(50.0, 100.0) == 20  # p = 0.5
    assert sizer.size(10.0, 100.0) == 34  # p = (0.5 + 0.1) / 2 = 0.3 -> ceil(33.3)
    assert sizer.share == pytest.approx(0.3)
    with pytest.raises(ValueError, match="floor 5, ceiling 4"):
        InFlightSizer(group_size=4, floor=5, ceiling=4, target=8)


def test_the_kv_cache_bounds_the_batch_it_fills() -> None:
    """~45k tokens of KV cache and 600-token requests: 75 run at once, not the batch's 128."""
    sizer = InFlightSizer(group_size=8, floor=4, ceiling=64, target=128, kv_tokens=45_000)
    assert sizer.size(25.0, 100.0) == 64  # no length measured yet: 128 / 0.25 / 8 = 64
    assert sizer.fits is None and sizer.batch == 128
    sizer = InFlightSizer(group_size=8, floor=4, ceiling=64, target=128, kv_tokens=45_000)
    assert sizer.size(25.0, 100.0, request_tokens=600.0) == 38  # ceil(75 / 0.25 / 8)
    assert sizer.fits == 75 and sizer.batch == 75
    assert sizer.size(0.0, 0.0, request_tokens=50_000.0) is None  # no episode: keep the cap
    assert sizer.fits == 1  # one request longer than the cache still runs alone
    short = InFlightSizer(group_size=8, floor=4, ceiling=64, target=16, kv_tokens=45_000)
    assert short.size(25.0, 100.0, request_tokens=600.0) == 8  # the batch is the smaller bound
    unknown = InFlightSizer(group_size=8, floor=4, ceiling=64, target=16)
    assert unknown.size(25.0, 100.0, request_tokens=600.0) == 8 and unknown.fits is None


def test_a_window_is_the_difference_of_two_readings_of_the_totals() -> None:
    before = EngineTotals(request_seconds=10.0, episode_seconds=40.0, tokens=3_000, calls=5)
    now = EngineTotals(request_seconds=35.0, episode_seconds=140.0, tokens=9_000, calls=15)
    assert now.window_since(before) == (25.0, 100.0, 600.0)  # 6,000 tokens over 10 calls
    assert now.window_since(now) == (0.0, 0.0, None)  # no call: no length
    sizer = InFlightSizer(group_size=8, floor=4, ceiling=64, target=128, kv_tokens=45_000)
    assert sizer.size_window(before, now) == 38 and sizer.fits == 75  # as `size(25, 100, 600)`
    assert sizer.size_window(NO_TOTALS, NO_TOTALS) is None


def test_the_metrics_integrate_requests_and_live_episodes_over_time() -> None:
    now = [0.0]
    metrics = RolloutMetrics(clock=lambda: now[0])
    with metrics.living():
        now[0] = 1.0
        with metrics.generating(600):
            with metrics.living():
                now[0] = 3.0  # two episodes and one request for 2 s
            now[0] = 4.0
        now[0] = 6.0
        with metrics.generating(1_200, calls=2):  # a batch of two requests (the sync loop's)
            now[0] = 7.0
    now[0] = 9.0
    assert metrics.request_seconds() == pytest.approx(3.0 + 2.0)
    assert (metrics.generate_calls, metrics.prompt_tokens) == (3, 1_800)
    assert metrics.episode_seconds() == pytest.approx(7.0 + 2.0)
    record = metrics.snapshot()
    assert (record["request_seconds"], record["episode_seconds"]) == pytest.approx((5.0, 9.0))


def test_the_buffer_s_cap_is_settable_and_validated() -> None:
    buf = _core.TrajectoryBuffer(
        group_size=1, groups_per_step=1, max_staleness=100, max_in_flight=1, max_ready=10
    )
    assert buf.try_admit("t_0", "t") is not None and buf.try_admit("t_1", "t") is None
    buf.max_in_flight = 3
    assert buf.max_in_flight == 3 and buf.capacity() == 2
    with pytest.raises(_core.BufferConfigError, match="max_in_flight must be at least 1"):
        buf.max_in_flight = 0
    assert buf.max_in_flight == 3


def test_the_dispatcher_resizes_its_cap_from_what_it_measures(noop_server, chat, free_port) -> None:
    """A slow engine (every turn 50 ms; the env answers at once): episodes live mostly in the
    engine, so the cap settles near target / (p x group_size) (here 6 / (p x 2): 4 groups at
    p 0.75), above the floor of 1 and below the ceiling of 8; the status records show it."""
    endpoint = f"tcp://127.0.0.1:{free_port}"
    engine = ScriptedEngine(chat, NOOP, delay_s=0.05)
    sizer = InFlightSizer(group_size=2, floor=1, ceiling=8, target=6, kv_tokens=10**6)
    seen: list[int] = []
    metrics: list[RolloutMetrics] = []

    async def main() -> None:
        with _core.GroupReceiver(endpoint) as receiver:
            d, pool, stream = build(
                [noop_server.zmq],
                engine,
                chat,
                endpoint,
                buffer={"max_in_flight": 8, "groups_per_step": 1},
                max_groups=40,
                sizer=sizer,
                resize_every_s=0.2,
            )
            assert d.buffer.max_in_flight == 3  # sizer.first, set before anything runs
            metrics.append(d.metrics)
            task = asyncio.create_task(d.run())
            received = asyncio.create_task(asyncio.to_thread(receive_groups, receiver, 40))
            while not task.done():
                seen.append(d.buffer.max_in_flight)
                await asyncio.sleep(0.05)
            assert len(await received) == 40
            await finish(task, pool, stream)

    asyncio.run(main())
    # most of an episode's life is in the engine (0.74-0.79 measured on 2 cores: the loop's own
    # work per turn counts as not-engine); the cap settles on what that share asks for, between
    # the floor and the ceiling (the first windows hold few turns and may overshoot: the last
    # third is settled)
    share = sizer.share
    assert share is not None and share > 0.6, share
    wanted = math.ceil(6 / share / 2)
    assert 1 < wanted < 8 and set(seen) <= set(range(1, 9)), seen
    assert all(abs(cap - wanted) <= 1 for cap in seen[-len(seen) // 3 :]), (seen, share)
    assert engine.max_in_flight <= max(seen) * 2
    # the KV cache's bound was read from the requests' measured length (far above the batch)
    m = metrics[0]
    mean = (m.prompt_tokens + m.generated_tokens) / m.generate_calls
    assert sizer.fits is not None and abs(sizer.fits - 10**6 / mean) < 0.2 * 10**6 / mean
