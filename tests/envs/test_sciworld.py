"""SciWorld in-process: the task numbering (4,639 ids, AgentGym's order) matches the installed
simulator, the split files follow their rules and are what make_splits writes, options are
checked, the JVM pool is bounded and reused, and a wrong action sequence does not succeed."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterator

import pytest

pytest.importorskip("scienceworld")
if shutil.which("java") is None:
    pytest.skip("SciWorld needs a Java runtime on PATH", allow_module_level=True)

from agentgym_envs import load_env
from agentgym_envs.sciworld import make_splits
from agentgym_envs.sciworld.env import SciWorldEnvironment
from agentgym_envs.sciworld.tasks import (
    EXCLUDED,
    NUM_TASKS,
    SIMULATOR_TASKS,
    TASK_LIST,
    TEST_CATEGORY_SIZES,
    build_task_list,
    first_index,
)
from agentgym_envs.server.base import EnvError, ErrorCode

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def env() -> Iterator[SciWorldEnvironment]:
    environment = SciWorldEnvironment(jvms=2, warm=1)
    yield environment
    environment.close()


def test_numbering_is_agentgyms_and_matches_the_simulator(env: SciWorldEnvironment) -> None:
    assert NUM_TASKS == len(TASK_LIST) == env.num_tasks() == 4639
    gw = env.pool.any_idle()
    assert gw is not None
    names = [str(n) for n in gw.call("getTaskNames")]
    live = {name: int(gw.call("getTaskMaxVariations", name)) for name in names}
    assert build_task_list(live) == TASK_LIST  # the constructor checked it too
    # the published boundaries: 2-1 starts at 120, 3-3 at 1436, 4-1 at 2936, 8-2 ends the list
    starts = first_index()
    assert (starts["2-1"], starts["3-3"], starts["4-1"], starts["6-1"]) == (120, 1436, 2936, 4136)
    assert TASK_LIST[-1].task_id == "8-2" and TASK_LIST[4638].variation == 9
    assert not {t.task_id for t in TASK_LIST} & EXCLUDED
    order = [tid for tid, _, _ in SIMULATOR_TASKS if tid not in EXCLUDED]
    assert list(dict.fromkeys(t.task_id for t in TASK_LIST)) == order


def test_out_of_range_data_idx_is_refused(env: SciWorldEnvironment) -> None:
    for bad in (-1, 4639, 10**6):
        with pytest.raises(EnvError) as e:
            env.check_data_idx(bad)
        assert e.value.code is ErrorCode.BAD_DATA_IDX and "[0, 4639)" in e.value.message
    env.check_data_idx(4638)


def _rows(name: str) -> list[dict[str, str]]:
    return list(json.loads((make_splits.DATA / name).read_text()))


def test_split_files_follow_their_rules() -> None:
    train, test = _rows("train.json"), _rows("test.json")
    assert Counter(r["category"] for r in test) == Counter(TEST_CATEGORY_SIZES)
    assert len(test) == 200 and len(train) == 2312
    ids = {
        name: [int(r["item_id"].removeprefix("sciworld_")) for r in rows]
        for name, rows in (
            ("train", train),
            ("test", test),
        )
    }
    assert not set(ids["train"]) & set(ids["test"])
    for name, rows in (("train", train), ("test", test)):
        assert ids[name] == sorted(set(ids[name])) and all(0 <= i < NUM_TASKS for i in ids[name])
        assert all(
            TASK_LIST[i].category == r["category"] for i, r in zip(ids[name], rows, strict=True)
        )
    assert set(Counter(r["category"] for r in train)) == {t.category for t in TASK_LIST}


def test_make_splits_regenerates_the_shipped_files() -> None:
    train, test = make_splits.from_simulator()
    assert make_splits.render(train) == (make_splits.DATA / "train.json").read_text()
    assert make_splits.render(test) == (make_splits.DATA / "test.json").read_text()


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="does not take options"):
        load_env("sciworld", colour="red")
    with pytest.raises(ValueError, match="jvms"):
        load_env("sciworld", jvms="many")
    with pytest.raises(ValueError, match="jvms"):
        load_env("sciworld", jvms="0")


def test_reset_observation_and_a_wrong_sequence_fails(env: SciWorldEnvironment) -> None:
    episode = env.new_episode()
    first = episode.reset(first_index()["4-1"])  # find a living thing
    description, look = first.observation.split("\n", 1)
    assert description.startswith("Your task is to find a(n) living thing.")
    assert look.startswith("This room is called") and first.score == 0 and not first.done
    unknown = episode.step("fly to the moon")
    assert unknown.invalid and unknown.observation == "No known action matches that input."
    scores = [episode.step(a).score for a in ("look around", "open door to kitchen", "wait1")]
    assert max(scores) < 100 and "look around" in episode.available_actions()
    failed = episode.step("focus on agent")  # focusing on the wrong thing fails the task
    assert failed.done and failed.score == -100 and failed.reward == -100 - scores[-1]
    assert episode.observation() == failed.observation and episode.available_actions() == []
    episode.close()


def test_pool_is_bounded_and_reuses_its_jvms() -> None:
    env = SciWorldEnvironment(jvms=1, warm=1)
    try:
        pid = env.info()["jvm_pids"]
        a, b = env.new_episode(), env.new_episode()
        a.reset(0)
        with pytest.raises(EnvError, match="jvms=N") as e:
            b.reset(1)
        assert e.value.code is ErrorCode.INTERNAL
        a.close()  # frees the JVM: b gets the same one
        b.reset(1)
        assert [b.gateway_pid] == pid and env.info()["jvms_started_total"] == 1
        b.step("focus on agent")  # done: the JVM goes back, the final observation stays
        assert b.gateway_pid is None and b.observation() == "You focus on the agent."
        a.reset(2)
        assert [a.gateway_pid] == pid
    finally:
        env.close()
    assert env.info()["jvms_live"] == 0


def test_reference_reset_fields_rebuild_our_observation(env: SciWorldEnvironment) -> None:
    episode = env.new_episode()
    ours = episode.reset(first_index()["6-2"] + 3).observation
    ref = episode.reference_reset_fields()
    assert (ref["task_name"], ref["var_num"]) == ("chemistry-mix-paint-secondary-color", 3)
    assert ref["task_description"] + "\n" + ref["observation"] == ours  # as AgentGym's client
    episode.close()
