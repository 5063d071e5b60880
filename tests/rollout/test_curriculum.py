"""The curriculum by online difficulty: draws follow the bands on a synthetic stream, its state
resumes exactly, its settings are checked, and through the rollout service with a real BabyAI
server it learns the policy's bands, saves them at exit and resumes them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
import uvloop
from harness import ScriptedEngine
from pydantic import ValidationError
from test_dispatcher import service_config

from agentgym_rl import _core
from agentgym_rl.config.rollout import CurriculumConfig
from agentgym_rl.episode.dataset import Task, TaskSource
from agentgym_rl.rollout.curriculum import STATE_FILE, Curriculum
from agentgym_rl.rollout.service import run_service


def _tasks(n: int = 100) -> list[Task]:
    return [Task(f"maze_{i}", "maze", i, f"c{i % 4}") for i in range(n)]


def _fed(config: CurriculumConfig, seed: int = 0) -> Curriculum:
    """Tasks 0-24 always solved, 25-49 never, 50-74 half the time, 75-99 never played."""
    cur = Curriculum(TaskSource(_tasks(), seed=seed), config, seed=seed)
    for t in _tasks()[:75]:
        for k in range(config.window):
            cur.record(t, t.data_idx < 25 or (t.data_idx >= 50 and k % 2 == 0))
    return cur


def test_draws_follow_the_bands_on_a_synthetic_stream() -> None:
    config = CurriculumConfig(window=8, keep={"solved": 0.2, "unsolved": 0.4})
    cur = _fed(config)
    assert [cur.band(f"maze_{i}") for i in (0, 30, 60, 80)] == [
        "solved",
        "unsolved",
        "edge",
        "unseen",
    ]
    drawn = Counter(cur.next().data_idx for _ in range(6000))  # type: ignore[union-attr]
    by_band = Counter()
    for idx, n in drawn.items():
        by_band[("solved", "unsolved", "edge", "unseen")[idx // 25]] += n
    # each task is offered once an epoch; a band's tasks come back as often as it keeps them
    per_task = {b: by_band[b] / 25 for b in by_band}
    assert per_task["solved"] / per_task["edge"] == pytest.approx(0.2, abs=0.03)
    assert per_task["unsolved"] / per_task["edge"] == pytest.approx(0.4, abs=0.04)
    assert per_task["unseen"] / per_task["edge"] == pytest.approx(1.0, abs=0.06)
    shares = cur.shares()
    assert shares["edge"] == shares["unseen"] == 1.0
    assert shares["solved"] == pytest.approx(0.2, abs=0.03)
    assert min(drawn[i] for i in range(100)) > 0  # never never
    rows = {r.band: r for r in cur.rows()}
    assert (rows["solved"].keys, rows["solved"].success) == (25, 1.0)
    assert (rows["edge"].keys, rows["edge"].success) == (25, 0.5)
    assert rows["unseen"].keys == 0 and rows["unseen"].considered > 0


def test_the_recent_window_moves_a_task_between_bands() -> None:
    config = CurriculumConfig(window=4, min_episodes=2)
    cur = Curriculum(TaskSource(_tasks(4)), config)
    task = _tasks(4)[0]
    cur.record(task, False)
    assert cur.band("maze_0") == "unseen"
    cur.record(task, False)
    assert cur.band("maze_0") == "unsolved"
    cur.record(task, True)
    assert cur.band("maze_0") == "edge"
    for _ in range(4):
        cur.record(task, True)
    assert cur.band("maze_0") == "solved"  # the failures left the window
    by_category = Curriculum(TaskSource(_tasks(8)), CurriculumConfig(by="category"))
    assert by_category.key(_tasks(8)[5]) == "c1"
    assert by_category.key(Task("maze_9", "maze", 9)) == "maze_9"  # no category: its own key


def test_a_resumed_curriculum_draws_exactly_as_one_that_never_stopped() -> None:
    config = CurriculumConfig(window=8)
    whole = _fed(config, seed=3)
    want = [whole.next().item_id for _ in range(300)]  # type: ignore[union-attr]
    first = _fed(config, seed=3)
    got = [first.next().item_id for _ in range(120)]  # type: ignore[union-attr]
    state = json.loads(json.dumps(first.state()))  # as the file keeps it
    source = TaskSource(_tasks(), seed=3, cursor=first.cursor)  # type: ignore[arg-type]
    resumed = Curriculum(source, config, seed=3, state=state)
    got += [resumed.next().item_id for _ in range(180)]  # type: ignore[union-attr]
    assert got == want
    assert resumed.state()["recent"] == whole.state()["recent"]


def test_settings_are_checked() -> None:
    with pytest.raises(ValidationError, match="solved"):
        CurriculumConfig(keep={"solved": 0.0})  # never drawn: refused
    with pytest.raises(ValidationError, match="below high"):
        CurriculumConfig(low=0.5, high=0.5)
    with pytest.raises(ValidationError, match="by"):
        CurriculumConfig(by="env")


def _serve_until(config, engine, chat, endpoint: str, groups: int) -> None:
    """Run the rollout service until `groups` groups arrived, then SIGTERM it."""

    async def main() -> None:
        got, deadline = 0, time.monotonic() + 120
        with _core.GroupReceiver(endpoint) as receiver:
            task = asyncio.create_task(run_service(config, engine, chat=chat, quiet=True))
            while got < groups:
                assert time.monotonic() < deadline and not task.done(), f"{got} groups came"
                got += await asyncio.to_thread(receiver.recv, 0.2) is not None
            os.kill(os.getpid(), signal.SIGTERM)
            while not task.done():
                await asyncio.to_thread(receiver.recv, 0.05)
            await task

    uvloop.run(main())


def test_the_service_bands_what_the_policy_does_and_resumes_it(
    babyai_server, chat, free_port, tmp_path: Path
) -> None:
    """A policy that only turns (it never reaches a goal in 3 turns), GoTo's five levels as
    categories: every level it played becomes unsolved; the state is saved at SIGTERM and a
    resumed server goes on from it, skipping the unsolved levels it kept from the first run.
    (No learner: each server sends what staleness allows at version 0, 6 groups.)"""
    endpoint = f"tcp://127.0.0.1:{free_port}"
    goto = Path(__file__).resolve().parents[2] / "envs/agentgym_envs/babyai/data/goto_train.json"
    curriculum = (
        f"dataset.split={goto}",
        "dataset.curriculum={by: category, min_episodes: 1, window: 8}",
    )
    config = service_config(babyai_server, endpoint, tmp_path, *curriculum)
    engine = ScriptedEngine(chat, lambda prompt, rid: "Thought: look.\nAction: turn left")
    _serve_until(config, engine, chat, endpoint, 6)
    saved = json.loads((tmp_path / STATE_FILE).read_text())
    assert saved["config"]["by"] == "category" and saved["recent"]
    assert set(saved["recent"]) <= {
        "GoToLocal",
        "GoToObj",
        "GoToRedBall",
        "GoToRedBallGrey",
        "GoToRedBlueBall",
    }
    assert all(set(outcomes) == {0} for outcomes in saved["recent"].values())
    assert saved["draws"] == sum(saved["considered"].values()) >= 6
    first = json.loads((tmp_path / "cursor.json").read_text())

    resumed = service_config(babyai_server, endpoint, tmp_path, *curriculum, "dataset.resume=true")
    _serve_until(resumed, engine, chat, endpoint, 4)
    again = json.loads((tmp_path / STATE_FILE).read_text())
    assert again["draws"] > saved["draws"]
    for key, outcomes in saved["recent"].items():  # the earlier outcomes were kept
        assert len(again["recent"][key]) >= len(outcomes)
    considered = again["considered"]["unsolved"] - saved["considered"].get("unsolved", 0)
    kept = again["kept"].get("unsolved", 0) - saved["kept"].get("unsolved", 0)
    assert considered > kept  # some of the unsolved levels' tasks were skipped
    # every task a group took is behind the cursor; a task drawn that no group took yet (held
    # at the stop) is not, and the next run draws it again
    cursor = json.loads((tmp_path / "cursor.json").read_text())
    drawn = again["draws"] - saved["draws"]
    assert cursor["epoch"] > 0 or first["index"] + 4 <= cursor["index"] <= first["index"] + drawn


def test_the_run_summary_ends_with_the_tasks_by_band(tmp_path: Path) -> None:
    from agentgym_rl.report import write_report
    from agentgym_rl.rollout.curriculum import saved_state

    cur = _fed(CurriculumConfig(window=8))
    for _ in range(100):
        cur.next()
    (tmp_path / "rollout-0").mkdir()
    (tmp_path / "rollout-0" / STATE_FILE).write_text(json.dumps(saved_state(cur)))
    write_report(tmp_path)
    md = (tmp_path / "summary.md").read_text()
    assert "## Curriculum" in md and "rollout-0: Tasks by band (curriculum by task" in md
    assert "| solved | 25 | 1.00 |" in md
