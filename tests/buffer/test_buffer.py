"""The staleness-controlled buffer through the Python binding."""

from __future__ import annotations

import numpy as np
import pytest

from agentgym_rl import _core


def make_sample(reward: float, version: int = 0, status: str = "done", n: int = 6) -> _core.Sample:
    mask = np.array([0, 0, 1, 1, 0, 1], dtype=np.uint8)[:n]
    return _core.Sample(
        np.arange(n, dtype=np.uint32),
        mask,
        np.where(mask == 1, -0.5, 0.0).astype(np.float32),
        np.full(n, version, dtype=np.uint32),
        np.array([2, 4, 5, 6], dtype=np.uint32),
        reward=reward,
        status=status,
        turns=2,
        turn_cap=4,
        dispatch_version=version,
    )


def make_buffer(**kw: object) -> _core.TrajectoryBuffer:
    args: dict[str, object] = dict(
        group_size=2, groups_per_step=2, max_staleness=1, max_in_flight=8, max_ready=8
    )
    args.update(kw)
    return _core.TrajectoryBuffer(**args)  # type: ignore[arg-type]


def test_sample_round_trips_arrays_and_flags() -> None:
    s = make_sample(0.75, version=3, status="truncated")
    assert s.input_ids.dtype == np.uint32 and s.loss_mask.dtype == np.uint8
    assert s.logprobs.dtype == np.float32 and s.versions.dtype == np.uint32
    assert list(s.loss_mask) == [0, 0, 1, 1, 0, 1]
    assert s.truncated and not s.env_failure and s.status == "truncated"
    assert s.reward == pytest.approx(0.75) and len(s) == 6


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(status="finished"), "unknown status"),
        (dict(reward=float("nan")), "finite"),
    ],
)
def test_sample_rejects_bad_fields(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = dict(reward=1.0, status="done")
    args.update(kwargs)
    z = np.zeros(3, dtype=np.uint32)
    with pytest.raises(_core.SampleError, match=message):
        _core.Sample(z, np.zeros(3, np.uint8), np.zeros(3, np.float32), z, z[:2], **args)  # type: ignore[arg-type]


def test_sample_rejects_misaligned_arrays() -> None:
    z = np.zeros(3, dtype=np.uint32)
    with pytest.raises(_core.SampleError, match="inconsistent length of `loss_mask`"):
        _core.Sample(
            z, np.zeros(2, np.uint8), np.zeros(3, np.float32), z, z[:2], reward=0.0, status="done"
        )
    for spans in ([0, 2, 3], [0, 4]):  # not [start, end) pairs; a span past the end
        with pytest.raises(_core.SampleError, match="turn_spans"):
            _core.Sample(
                z,
                np.zeros(3, np.uint8),
                np.zeros(3, np.float32),
                z,
                np.array(spans, np.uint32),
                reward=0.0,
                status="done",
            )
    with pytest.raises(TypeError):
        _core.Sample(
            z.astype(np.int64),
            np.zeros(3, np.uint8),
            np.zeros(3, np.float32),
            z,
            z[:2],
            reward=0.0,
            status="done",
        )  # type: ignore[arg-type]


def test_admission_budget_and_release() -> None:
    buf = make_buffer()
    # (S + v + 1) * B = 4 groups may start at version 0.
    tickets = [buf.try_admit(f"babyai_{i}", "babyai") for i in range(5)]
    assert [t is not None for t in tickets] == [True] * 4 + [False]
    t0 = tickets[0]
    assert t0 is not None and t0.dispatch_version == 0
    assert buf.add_sample(t0.group_id, make_sample(1.0)) == "pending"
    assert buf.pop_ready() is None
    assert buf.add_sample(t0.group_id, make_sample(0.0)) == "ready"
    group = buf.pop_ready()
    assert group is not None and group.task_id == "babyai_0" and len(group) == 2
    assert group.rewards == [1.0, 0.0] and group.min_version() == 0
    buf.set_version(1)
    assert buf.capacity() == 2
    c = buf.counters()
    assert (c["admitted"], c["released"], c["running"]) == (4, 1, 3)


def test_stale_group_is_counted_not_released() -> None:
    buf = make_buffer(group_size=1, max_staleness=0)
    t = buf.try_admit("babyai_1", "babyai")
    assert t is not None
    buf.add_sample(t.group_id, make_sample(1.0, version=0))
    buf.set_version(1)
    assert buf.pop_ready() is None
    assert buf.counters()["stale"] == 1


def test_zero_variance_filter() -> None:
    buf = make_buffer(filter_zero_variance=True)
    t = buf.try_admit("babyai_1", "babyai")
    assert t is not None
    buf.add_sample(t.group_id, make_sample(1.0))
    assert buf.add_sample(t.group_id, make_sample(1.0)) == "filtered"
    assert buf.counters()["filtered"] == 1


def test_every_buffer_error_maps_to_its_exception() -> None:
    with pytest.raises(_core.BufferConfigError, match="group_size"):
        make_buffer(group_size=0)
    buf = make_buffer()
    with pytest.raises(_core.UnknownGroupError):
        buf.add_sample(12345, make_sample(1.0))
    with pytest.raises(_core.UnknownGroupError):
        buf.abort_group(12345)
    buf.set_version(2)
    with pytest.raises(_core.VersionRegressionError):
        buf.set_version(1)
    for exc in (_core.BufferConfigError, _core.UnknownGroupError, _core.VersionRegressionError):
        assert issubclass(exc, _core.BufferStateError)
        assert issubclass(exc, _core.AgentGymError)
