"""The episode table in-process: protocol rules, truncation marker, idle reaping on a fake clock."""

from __future__ import annotations

import pytest

from agentgym_envs.server.base import EnvError, Environment, Episode, ErrorCode, StepResult
from agentgym_envs.server.table import EpisodeTable, dispatch


class _Echo(Episode):
    def __init__(self) -> None:
        self.obs = ""

    def reset(self, data_idx: int) -> StepResult:
        self.obs = "x" * data_idx
        return StepResult(self.obs)

    def step(self, action: str) -> StepResult:
        if action == "boom":
            raise ValueError("kaput")
        return StepResult(action, 1.0, 1.0, action == "end", invalid=action == "nope")

    def observation(self) -> str:
        return self.obs

    def available_actions(self) -> list[str]:
        return ["end"]


class _EchoEnv(Environment):
    name = "echo"

    def new_episode(self) -> Episode:
        return _Echo()

    def num_tasks(self) -> int | None:
        return 10_000


def test_rules_and_errors() -> None:
    table = EpisodeTable(_EchoEnv(), max_obs_chars=300)
    eid = dispatch(table, "create", {})["id"]
    with pytest.raises(EnvError) as err:
        dispatch(table, "step", {"id": eid, "action": "a"})
    assert err.value.code is ErrorCode.NOT_RESET
    long = dispatch(table, "reset", {"id": eid, "data_idx": 5000})["observation"]
    assert len(long) <= 300 and long.endswith(f"showing {long.index(chr(10))} of 5000 characters]")
    with pytest.raises(EnvError) as err:
        dispatch(table, "step", {"id": eid, "action": "boom"})
    assert err.value.code is ErrorCode.INTERNAL and "kaput" in err.value.message
    refused = dispatch(table, "step", {"id": eid, "action": "nope"})
    assert (refused["invalid"], refused["done"]) == (True, False)
    ended = dispatch(table, "step", {"id": eid, "action": "end"})
    assert (ended["invalid"], ended["done"]) == (False, True)
    with pytest.raises(EnvError) as err:
        dispatch(table, "step", {"id": eid, "action": "end"})
    assert err.value.code is ErrorCode.EPISODE_DONE
    with pytest.raises(EnvError) as err:
        dispatch(table, "reset", {"id": eid, "data_idx": 10_000})
    assert err.value.code is ErrorCode.BAD_DATA_IDX
    assert dispatch(table, "reset", {"id": eid, "data_idx": 1})["done"] is False  # reset revives


def test_idle_reaping_on_a_fake_clock() -> None:
    now = [0.0]
    table = EpisodeTable(_EchoEnv(), idle_timeout_s=10, clock=lambda: now[0])
    a, b = table.create()["id"], table.create()["id"]
    table.reset(a, 1)
    now[0] = 8.0
    table.reset(b, 1)
    now[0] = 12.0
    assert table.reap_idle() == 1 and len(table) == 1
    with pytest.raises(EnvError):
        table.observation(a)
    assert table.observation(b) == "x"
    assert EpisodeTable(_EchoEnv(), idle_timeout_s=0).idle_timeout_s is None
