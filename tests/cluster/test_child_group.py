"""A learner on several nodes under Ray is one supervised process made of a child per node
(`ChildGroup`): started and stopped together, failed as soon as one member fails, finished
when all have; `ray_launch` gives it a child per node's actor, each with its own log."""

from __future__ import annotations

from pathlib import Path

from agentgym_rl.cluster.ray_child import ChildGroup, RayChild
from agentgym_rl.cluster.ray_job import ray_launch
from agentgym_rl.processes.child import ChildSpec


class Member:
    """A stand-in child whose exit code the test sets."""

    def __init__(self, name: str) -> None:
        self.spec = ChildSpec(name, "learn", ["true"], "true")
        self.log_path = Path(f"{name}.log")
        self.restarts = 0
        self.code: int | None = None
        self.calls: list[str] = []

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return 1

    def start(self) -> Member:
        self.calls.append("start")
        return self

    def poll(self) -> int | None:
        return self.code

    def running(self) -> bool:
        return self.code is None

    def terminate(self) -> None:
        self.calls.append("terminate")

    def kill_group(self) -> None:
        self.calls.append("kill")

    def wait(self, timeout_s: float) -> int | None:
        return self.code

    def tail(self, lines: int = 30) -> list[str]:
        return [f"last line of {self.name}"]


def test_a_group_fails_with_its_first_failing_member_and_finishes_with_all() -> None:
    a, b = Member("learn-0"), Member("learn-1")
    group = ChildGroup(ChildSpec("learn", "learn", ["x"], "x"), [a, b]).start()
    assert a.calls == b.calls == ["start"]
    assert group.poll() is None and group.running()
    a.code = 0
    assert group.poll() is None  # one node done, the other still training
    b.code = 0
    assert group.poll() == 0
    b.code = 3
    assert group.poll() == 3
    group.terminate()
    group.kill_group()
    assert a.calls[-2:] == b.calls[-2:] == ["terminate", "kill"]
    assert group.tail() == ["[learn-0] last line of learn-0", "[learn-1] last line of learn-1"]


def test_ray_launch_gives_a_multi_node_learner_a_child_per_node(tmp_path: Path) -> None:
    actors = {"learn-0": object(), "learn-1": object(), "rollout-0": object()}
    launch = ray_launch(actors)
    spec = ChildSpec("learn", "learn", ["torchrun"], "torchrun", hosts=("10.0.0.1", "10.0.0.2"))
    group = launch(spec, tmp_path, {})
    assert isinstance(group, ChildGroup) and group.name == "learn"
    members = group.members
    assert [m.log_path.name for m in members] == ["learn-0.log", "learn-1.log"]
    assert [m.actor for m in members if isinstance(m, RayChild)] == [
        actors["learn-0"],
        actors["learn-1"],
    ]
    init = launch(ChildSpec("init-model", "init", ["x"], "x"), tmp_path, {})
    assert isinstance(init, RayChild) and init.actor is actors["learn-0"]
    rollout = launch(ChildSpec("rollout-0", "rollout", ["x"], "x"), tmp_path, {})
    assert isinstance(rollout, RayChild) and rollout.actor is actors["rollout-0"]
