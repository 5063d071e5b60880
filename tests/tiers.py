"""Test tiers: what a test costs, as a marker on every test.

- `unit`: in this process, no real process, browser, JVM or engine started; `pytest -m unit`
  is the quick loop (under two minutes on 2 cores).
- `process`: starts real processes (env servers, the CLI, browsers, JVMs, ZeroMQ peers).
- `engine`: runs a real vLLM engine or Megatron model (in process or not); the costliest.
- `slow` (besides a tier): long even for its tier (many episodes, whole training runs).

A test gets `engine` or `process` by its module's `pytestmark`, its own marker, or a fixture
that starts one (`ENGINE_FIXTURES`, `PROCESS_FIXTURES`); every other test is `unit`, and a unit
test that starts a process fails, naming the marker it needs (`forbid_processes`), so the tiers
stay true as tests change.
"""

from __future__ import annotations

import multiprocessing.process
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

TIERS = ("unit", "process", "engine")
ENGINE_FIXTURES = {"vllm_engine"}
PROCESS_FIXTURES = {
    "spawn_server",
    "babyai_server",
    "noop_server",
    "spawn",
    "babyai",
    "textcraft",
    "ray_cluster",
    "slurm_cluster",
    "smollm2",
}


def tier_of(item: pytest.Item) -> str:
    """The tier `item` belongs to (see the module docstring)."""
    names = {mark.name for mark in item.iter_markers()}
    fixtures = set(getattr(item, "fixturenames", ()))
    if "engine" in names or fixtures & ENGINE_FIXTURES:
        return "engine"
    if "process" in names or fixtures & PROCESS_FIXTURES:
        return "process"
    return "unit"


class UnitTierError(AssertionError):
    """A test of the unit tier started a process."""


@contextmanager
def forbid_processes(test: str) -> Iterator[None]:
    """Within the block, starting a subprocess or a multiprocessing child raises."""

    popen = subprocess.Popen.__init__

    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        # ctypes' find_library asks ldconfig (torch does at its first import): a library
        # lookup, not a process the test runs
        command = args[0] if args else kwargs.get("args")
        if isinstance(command, list) and command[:1] == ["/sbin/ldconfig"]:
            popen(self, *args, **kwargs)
            return
        raise UnitTierError(
            f"{test} started a process; mark it `process` (or `engine` for vLLM/Megatron)"
        )

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", refuse)
        patch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
        yield
