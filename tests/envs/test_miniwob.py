"""MiniWoB++ through the web env: known-good action sequences solve tasks through a real
`agentgym_envs.server miniwob` process over HTTP and over ZMQ; the step clock's discount and
time-out; a reward floor through the agent loop; the split files; a killed browser fails only its live episodes; no Chromium outlives
the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright")
pytest.importorskip("miniwob")
if shutil.which("chromium") is None:
    pytest.skip("Debian's chromium is not installed", allow_module_level=True)

from tests.envs.conftest import ServerProc, processes_gone

from agentgym_envs.web.browser import children
from agentgym_envs.web.miniwob import (
    CLICK_TASKS,
    CLICK_TEST_SEEDS,
    CLICK_TRAIN_SEEDS,
    SEEDS,
    SPLITS,
    TASKS,
    TEST_SEEDS,
    TRAIN_SEEDS,
    item_index,
)
from agentgym_rl.config import ActionFormat
from agentgym_rl.processes.ports import free_port
from agentgym_rl.trajectory import ChatTokenizer

pytestmark = pytest.mark.process

DATA = Path(__file__).resolve().parents[2] / "envs" / "agentgym_envs" / "web" / "data"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProc]:
    proc = ServerProc("miniwob", free_port()).wait_ready(60)
    yield proc
    proc.close()


def _call(server: ServerProc, protocol: str) -> Callable[..., dict[str, Any]]:
    """`call(op, id=..., data_idx=..., action=...)` in the native op/field names; over HTTP in
    the web envs' dialect (AgentGym's WebArena one: `env_idx`, `idx`, `terminated`)."""

    def call(op: str, **fields: Any) -> dict[str, Any]:
        if protocol == "zmq":
            reply = server.zmq({"op": op, **fields})
            return reply if reply.get("ok") else {"error": reply["error"]}
        body = {"env_idx": fields.pop("id")} if "id" in fields else {}
        if "data_idx" in fields:
            body |= {"seed": 0, "idx": fields.pop("data_idx")}
        reply = dict(server.post(f"/{op}", {**body, **fields}))
        if "env_idx" in reply:
            reply["id"] = reply["env_idx"]
        if "terminated" in reply:
            reply["done"] = reply["terminated"]
        return reply

    return call


def _id(obs: str, role: str, name: str) -> str:
    match = re.search(rf"\[(\d+)\] {role} '{re.escape(name)}'", obs)
    assert match, f"no {role} {name!r} in\n{obs}"
    return match.group(1)


def _objective(obs: str) -> str:
    return obs.split("\nOBJECTIVE: ", 1)[1].split("\n", 1)[0]


def _solve_click_button(obs: str) -> list[str]:
    label = re.match(r'Click on the "(.*)" button\.', _objective(obs))
    assert label, _objective(obs)
    return [f"click [{_id(obs, 'button', label.group(1))}]"]


def _solve_enter_text(obs: str) -> list[str]:
    word = re.match(r'Enter "(.*)" into the text field', _objective(obs))
    assert word, _objective(obs)
    box = re.search(r"\[(\d+)\] textbox", obs)
    assert box
    return [
        f"type [{box.group(1)}] [{word.group(1)}] [0]",
        f"click [{_id(obs, 'button', 'Submit')}]",
    ]


def _solve_login_user(obs: str) -> list[str]:
    got = re.match(r'Enter the username "(.*)" and the password "(.*)" into', _objective(obs))
    assert got, _objective(obs)
    boxes = re.findall(r"\[(\d+)\] textbox", obs)
    return [
        f"type [{boxes[0]}] [{got.group(1)}] [0]",
        f"type [{boxes[1]}] [{got.group(2)}] [0]",
        f"click [{_id(obs, 'button', 'Login')}]",
    ]


SOLVERS = {
    "click-button": (_solve_click_button, 1.0),
    "enter-text": (_solve_enter_text, 0.95),  # the second action: 1 - 1 x 500 / 10000
    "login-user": (_solve_login_user, 0.9),  # the third action: 1 - 2 x 500 / 10000
}


@pytest.mark.parametrize("protocol", ["http", "zmq"])
@pytest.mark.parametrize("task", sorted(SOLVERS))
def test_known_good_sequences_solve_tasks(server: ServerProc, protocol: str, task: str) -> None:
    call = _call(server, protocol)
    solve, score = SOLVERS[task]
    eid = call("create")["id"]
    seed = 7 if protocol == "http" else 11
    obs = call("reset", id=eid, data_idx=item_index(task, seed))["observation"]
    assert obs.startswith("Tab 0 (current): ")
    assert f"\nURL: miniwob/{task}.html\n" in obs and "file://" not in obs  # no install folder
    actions = solve(obs)
    for i, action in enumerate(actions):
        step = call("step", id=eid, action=action)
        assert "error" not in step, step
        assert step["invalid"] is False and step["done"] is (i == len(actions) - 1), step
    # paid when the episode ends, over both wires (HTTP pays nothing before)
    assert step["score"] == pytest.approx(score, abs=1e-3) and step["reward"] == step["score"]
    assert step["observation"].startswith("NOTE: the episode is over; MiniWoB reward ")
    assert "error" in call("step", id=eid, action=actions[-1])  # done: refused
    call("close", id=eid)


def test_wrong_answer_and_invalid_actions(server: ServerProc) -> None:
    call = _call(server, "http")
    eid = call("create")["id"]
    obs = call("reset", id=eid, data_idx=item_index("click-button", 3))["observation"]
    bad = call("step", id=eid, action="click [99999]")
    assert bad["invalid"] and not bad["done"] and "no element with id [99999]" in bad["observation"]
    label = re.match(r'Click on the "(.*)" button\.', _objective(obs)).group(1)  # type: ignore[union-attr]
    others = [
        m.group(1)
        for m in re.finditer(r"\[(\d+)\] button '(.*)'", obs)
        if m.group(2).lower() != label.lower()
    ]
    if others:  # some seeds show only buttons with the right label
        step = call("step", id=eid, action=f"click [{others[0]}]")
        assert step["done"] and step["score"] == -1.0
    call("close", id=eid)


def test_links_in_the_tree_show_no_install_folder(server: ServerProc) -> None:
    call = _call(server, "zmq")
    eid = call("create")["id"]
    obs = call("reset", id=eid, data_idx=item_index("click-tab", 4))["observation"]
    assert "link 'Tab #1' url: miniwob/click-tab.html#tabs-1" in obs and "file://" not in obs
    call("close", id=eid)


@pytest.mark.parametrize(("floor", "wrong_click"), [(None, -1.0), (0.0, 0.0)])
def test_a_reward_floor_lifts_a_wrong_click_to_doing_nothing(
    server: ServerProc, chat: ChatTokenizer, floor: float | None, wrong_click: float
) -> None:
    """Through the agent loop and the env pool: MiniWoB scores a wrong click -1, so a guessing
    policy would learn to click nothing; with `reward_floor: 0` it trains on 0 instead, and a
    right click keeps its score."""
    from agentgym_rl import _core
    from agentgym_rl.episode.agent import AgentLoop
    from agentgym_rl.episode.dataset import Task
    from agentgym_rl.episode.types import EnvSpec, EpisodePlan, TurnBudget
    from scripted_engine import ScriptedEngine

    def click(pick_right: bool) -> Callable[[str, str], str]:
        def reply(prompt: str, request_id: str) -> str:
            obs = prompt.rsplit("Tab 0 (current): ", 1)[1]
            label = re.search(r'Click on the "(.*)" button\.', obs).group(1)  # type: ignore[union-attr]
            ids = [
                m[1]
                for m in re.finditer(r"\[(\d+)\] button '(.*)'", obs)
                if (m[2] == label) is pick_right
            ]
            return f"```click [{ids[0]}]```"

        return reply

    async def play(pick_right: bool, seed: int) -> _core.Sample:
        pool = _core.EnvPool([_core.EnvServer("miniwob", f"tcp://127.0.0.1:{server.zmq_port}")])
        spec = EnvSpec(ActionFormat.WEBARENA, reward_floor=floor)
        agent = AgentLoop(
            ScriptedEngine(chat, click(pick_right)),
            pool,
            chat,
            envs={"miniwob": spec},
            max_model_len=4096,
            max_tokens_per_turn=64,
        )
        idx = item_index("click-button", seed)
        plan = EpisodePlan(Task(f"miniwob_{idx}", "miniwob", idx), 0, TurnBudget(0, 2), "e0")
        try:
            return await asyncio.wait_for(agent.run(plan), 60)
        finally:
            await pool.shutdown()

    wrong = asyncio.run(play(False, 21))  # seed 21 shows buttons of other labels
    assert (wrong.status, wrong.turns, wrong.reward) == ("done", 1, wrong_click)
    right = asyncio.run(play(True, 21))
    assert (right.status, right.turns, right.reward) == ("done", 1, 1.0)


def test_leaving_the_task_page_ends_the_episode_at_minus_one(server: ServerProc) -> None:
    """A random or confused policy may `goto` away: the episode ends (-1), nothing raises."""
    call = _call(server, "zmq")
    eid = call("create")["id"]
    call("reset", id=eid, data_idx=item_index("click-button", 4))
    step = call("step", id=eid, action="goto [about:blank]")
    assert step["done"] and step["score"] == -1.0 and "left the task" in step["observation"]
    call("close", id=eid)


def test_the_step_clock_times_a_task_out(server: ServerProc) -> None:
    """click-button has 10 s; each action counts 500 ms: the 20th action ends it at -1."""
    call = _call(server, "zmq")
    eid = call("create")["id"]
    call("reset", id=eid, data_idx=item_index("click-button", 5))
    for i in range(20):
        step = call("step", id=eid, action="scroll [down]")
        assert step["done"] is (i == 19)
    assert step["score"] == -1.0 and "timed out" in step["observation"].split("\n", 1)[0]
    call("close", id=eid)


def test_splits_name_tasks_and_seeds() -> None:
    for name, (seeds, tasks) in SPLITS.items():
        items = json.loads((DATA / f"miniwob_{name}.json").read_text())
        assert len(items) == len(tasks) * len(seeds)
        for item in items:
            idx = int(item["item_id"].removeprefix("miniwob_"))
            assert 0 <= idx < len(TASKS) * SEEDS and TASKS[idx % len(TASKS)] == item["category"]
            assert idx // len(TASKS) in seeds and item["category"] in tasks
        assert {item["category"] for item in items[: len(tasks)]} == set(tasks)  # seed-major
    assert not set(TRAIN_SEEDS) & set(TEST_SEEDS)
    assert not set(CLICK_TRAIN_SEEDS) & set(CLICK_TEST_SEEDS)
    assert set(CLICK_TASKS) <= set(TASKS)


def _tree_pids(pid: int) -> list[int]:
    return children(pid, recursive=True)


@pytest.mark.slow
def test_killed_browser_then_server_exit_leaves_no_chromium() -> None:
    server = ServerProc("miniwob", free_port()).wait_ready(60)
    try:
        call = _call(server, "http")
        a, b = call("create")["id"], call("create")["id"]
        call("reset", id=a, data_idx=item_index("click-button", 1))
        call("reset", id=b, data_idx=item_index("click-link", 1))
        browser = server.get("/info")["browser_pid"]
        os.kill(browser, signal.SIGKILL)
        assert processes_gone([browser])
        for eid in (a, b):
            assert "died" in call("step", id=eid, action="scroll [down]")["error"]
        c = call("create")["id"]
        obs = call("reset", id=c, data_idx=item_index("click-button", 2))["observation"]
        step = call("step", id=c, action=_solve_click_button(obs)[0])
        assert step["score"] == 1.0
        assert server.get("/info")["browsers_crashed"] == 1
        pids = [p for p in _tree_pids(server.proc.pid) if "chrom" in _comm(p)]
        assert pids
        assert server.terminate() == 0
        assert processes_gone(pids)
    finally:
        server.close()


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return ""
