"""Wordle and Maze served by the real env server, found by name (their entry points), over the
AgentGym HTTP protocol and ZeroMQ: a winning episode each way, refused actions flagged, options
given on the command line and checked before serving."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
from tests.envs.conftest import ServerProc

from agentgym_envs.maze.layout import generate
from agentgym_envs.wordle.env import load_words
from agentgym_rl.processes.env_servers import EnvServerError

pytestmark = pytest.mark.process

Spawn = Callable[..., ServerProc]


def test_wordle_over_http_and_zmq(spawn: Spawn) -> None:
    server = spawn("wordle")
    info = server.get("/info")
    assert (info["env"], info["num_tasks"], info["action_format"]) == ("wordle", 2000, "react")
    targets, _ = load_words()

    eid = server.post("/create")["id"]
    reset = server.post("/reset", {"id": eid, "data_idx": 7})
    assert "You have 6 guesses." in reset["observation"]
    refused = server.post("/step", {"id": eid, "action": "zzzzz"})
    assert refused["invalid"] is True and refused["done"] is False
    won = server.post("/step", {"id": eid, "action": targets[7]})
    assert (won["reward"], won["score"], won["done"], won["invalid"]) == (1.0, 1.0, True, False)
    assert "out of range" in server.post("/reset", {"id": eid, "data_idx": 2000})["error"]
    server.post("/close", {"id": eid})

    zid = server.zmq({"op": "create"})["id"]
    assert server.zmq({"op": "reset", "id": zid, "data_idx": 8})["ok"]
    assert server.zmq({"op": "available_actions", "id": zid})["actions"] == ["<five-letter word>"]
    step = server.zmq({"op": "step", "id": zid, "action": f"guess {targets[8]}"})
    assert step["ok"] and step["done"] is True and step["score"] == 1.0
    server.zmq({"op": "close", "id": zid})


def test_maze_over_http_and_zmq(spawn: Spawn) -> None:
    server = spawn("maze", "--env-option", "max_steps=60")
    info = server.get("/info")
    assert (info["env"], info["num_tasks"], info["max_steps"]) == ("maze", None, 60)

    maze = generate(11)
    path = maze.shortest_path()
    assert path is not None
    eid = server.post("/create")["id"]
    reset = server.post("/reset", {"id": eid, "data_idx": 11})
    assert f"You are at ({maze.start[0]}, {maze.start[1]})." in reset["observation"]
    assert "60 moves left" in reset["observation"]
    wall = next(m for m in ("up", "down", "left", "right") if m not in maze.open[maze.start])
    assert server.post("/step", {"id": eid, "action": f"move {wall}"})["invalid"] is True
    for move in path:
        last = server.post("/step", {"id": eid, "action": f"move {move}"})
    assert (last["reward"], last["done"]) == (1.0, True)
    server.post("/close", {"id": eid})

    zid = server.zmq({"op": "create"})["id"]
    server.zmq({"op": "reset", "id": zid, "data_idx": 11})
    ops = [{"op": "step", "id": zid, "action": m} for m in path]
    results = server.zmq({"op": "batch", "ops": ops})["results"]
    assert all(r["ok"] for r in results) and results[-1]["done"] and results[-1]["score"] == 1.0
    server.zmq({"op": "close", "id": zid})


@pytest.mark.parametrize(("env", "option"), [("wordle", "guesses=0"), ("maze", "max_steps=x")])
def test_a_bad_option_stops_the_server_before_it_serves(
    spawn: Spawn, env: str, option: str
) -> None:
    with pytest.raises(EnvServerError, match="exited with"):
        spawn(env, "--env-option", option)


def test_importing_the_envs_loads_no_word_list() -> None:
    # Importing is cheap (`env list`, the catalog's checks): wordfreq loads at construction.
    code = (
        "import sys, agentgym_envs.wordle.env, agentgym_envs.maze.env; "
        "assert 'wordfreq' not in sys.modules, 'wordfreq imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
