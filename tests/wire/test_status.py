"""The episode status exists once in Python (`wire.types.Status`) and matches the Rust enum."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agentgym_rl import _core
from agentgym_rl.wire.types import Status

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "wire"


def sample(status: str) -> _core.Sample:
    z = np.zeros(0, np.uint32)
    return _core.Sample(
        z, np.zeros(0, np.uint8), np.zeros(0, np.float32), z, z, reward=0.0, status=status
    )


def test_python_statuses_are_the_rust_ones_in_order() -> None:
    # group_all_statuses holds one sample per `Status::ALL` entry, encoded by Rust (the golden
    # test in crates/agentgym-wire/tests/golden.rs keeps it byte-equal to the encoder)
    group = _core.decode_group((FIXTURES / "group_all_statuses.msgpack").read_bytes())
    assert [s.status for s in group.samples] == [s.value for s in Status]


@pytest.mark.parametrize("status", list(Status))
def test_the_binding_accepts_every_status(status: Status) -> None:
    assert sample(status.value).status == status.value


def test_the_binding_refuses_an_unknown_status() -> None:
    with pytest.raises(_core.SampleError):
        sample("finished")
