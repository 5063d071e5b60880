"""A task the buffer refused is held, not lost: a stop while it is held saves the cursor from
before it, and a run resumed there draws it first."""

from __future__ import annotations

from agentgym_rl.episode.dataset import Cursor, Task, TaskSource
from agentgym_rl.rollout.pending import PendingTasks

TASKS = [Task(f"t{i}", "babyai", i) for i in range(5)]


def test_a_held_task_is_drawn_again_after_a_stop() -> None:
    tasks = PendingTasks(TaskSource(TASKS, shuffle=False, epochs=1))
    first = tasks.take()
    assert first is not None and first.item_id == "t0"
    assert tasks.cursor == Cursor(0, 1)  # taken: the cursor is past it
    second = tasks.take()
    assert second is not None
    tasks.put_back(second)  # the buffer had no room
    assert tasks.cursor == Cursor(0, 1)  # a stop now saves the place before it
    assert tasks.take() is second and tasks.cursor == Cursor(0, 2)  # held: not drawn twice
    tasks.put_back(second)
    assert tasks.take() is second  # held twice, still from the same place

    # the stop: the next run resumes where the held task was drawn, and draws it first
    tasks.put_back(second)
    resumed = PendingTasks(TaskSource(TASKS, shuffle=False, epochs=1, cursor=tasks.cursor))
    got = resumed.take()
    assert got is not None and got.item_id == "t1"


def test_exhausted_only_when_nothing_is_held() -> None:
    tasks = PendingTasks(TaskSource(TASKS[:1], shuffle=False, epochs=1))
    only = tasks.take()
    assert only is not None
    tasks.put_back(only)
    assert not tasks.exhausted  # the source has no task left to give, but one is held
    assert tasks.take() is only and tasks.take() is None and tasks.exhausted
