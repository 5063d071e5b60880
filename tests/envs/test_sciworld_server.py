"""SciWorld through real server processes: the simulator's gold action sequences reach score 100
for every numbered task (half over HTTP, half over ZeroMQ), a killed simulator JVM fails only its
own episode and is replaced, memory stays flat over many episodes, and no java process outlives
the server (SIGTERM or SIGKILL)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("scienceworld")
if shutil.which("java") is None:
    pytest.skip("SciWorld needs a Java runtime on PATH", allow_module_level=True)

from tests.envs.conftest import ServerProc

from agentgym_envs.sciworld.gateways import Gateway, rss_of
from agentgym_envs.sciworld.tasks import EXCLUDED, SIMULATOR_TASKS, first_index
from agentgym_rl.processes.ports import free_port
from waiting import wait_until

pytestmark = pytest.mark.process

TASK_IDS = [tid for tid, _, _ in SIMULATOR_TASKS if tid not in EXCLUDED]


def java_children(pid: int) -> list[int]:
    """The java processes `pid` started (children of any of its threads: warm starts run in
    threads, and /proc lists a child under the thread that forked it)."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            out += [int(c) for c in f.read().split()]
    return sorted(c for c in out if _comm(c) == "java")


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may never reap an orphan)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids: list[int], deadline_s: float = 15.0) -> list[int]:
    """The pids still running after up to `deadline_s` (none: all gone)."""
    with contextlib.suppress(AssertionError):
        wait_until(lambda: not any(running(p) for p in pids), deadline_s, "processes gone")
    return [p for p in pids if running(p)]


@pytest.fixture(scope="module")
def gold() -> Iterator[dict[str, tuple[int, list[str]]]]:
    """Task id -> (data_idx, gold actions) of its variation 0, from the simulator itself."""
    gw = Gateway()
    try:
        out = {}
        for tid, name, _ in SIMULATOR_TASKS:
            if tid in TASK_IDS:
                gw.call("load", name, 0, "", True)
                out[tid] = (first_index()[tid], [str(a) for a in gw.call("getGoldActionSequence")])
        yield out
    finally:
        gw.kill()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProc]:

    proc = ServerProc("sciworld", free_port(), "--env-option", "jvms=4").wait_ready(60)
    yield proc
    proc.close()


def _http_call(server: ServerProc) -> Callable[..., Any]:
    def call(op: str, **fields: Any) -> Any:
        return server.post(f"/{op}", fields)

    return call


def _zmq_call(server: ServerProc) -> Callable[..., Any]:
    def call(op: str, **fields: Any) -> Any:
        reply = server.zmq({"op": op, **fields})
        return reply if reply.get("ok") else {"error": reply["error"]}

    return call


@pytest.mark.parametrize("protocol", ["http", "zmq"])
def test_gold_sequences_reach_100(
    server: ServerProc, gold: dict[str, tuple[int, list[str]]], protocol: str
) -> None:
    call = (_http_call if protocol == "http" else _zmq_call)(server)
    mine = TASK_IDS[protocol == "zmq" :: 2]  # every other task: both protocols, each task once
    for tid in mine:
        data_idx, actions = gold[tid]
        eid = call("create")["id"]
        reply = call("reset", id=eid, data_idx=data_idx)
        # HTTP speaks AgentGym's SciWorld reply: the task apart, the look-around as observation
        first = reply.get("task_description", "") + "\n" + reply["observation"]
        assert (first if protocol == "http" else reply["observation"]).startswith("Your task is")
        assert not reply["done"]
        for action in actions:
            reply = call("step", id=eid, action=action)
            if reply["done"]:
                break
        assert (reply["score"], reply["done"]) == (100.0, True), (tid, reply)
        assert "error" in call("step", id=eid, action="look around")  # done: refused
        call("close", id=eid)


def test_agentgym_sciworld_client_requests_work_unchanged(server: ServerProc) -> None:
    """What AgentGym's SciWorld client sends (agentenv at 3ef9235): `POST /create` without a
    body, `/reset {"data_idx", "id"}` whose `task_description + "\n" + observation` it shows,
    `/step {"action", "id"}` reading observation/reward/score/done. Its first observation equals
    ours over ZeroMQ, and the Rust pool over HTTP joins the two parts the same way."""
    import asyncio

    import httpx

    from agentgym_rl import _core

    http = httpx.Client(base_url=server.http.base_url, timeout=30)
    eid = http.post("/create").json()["id"]
    reset = http.post("/reset", json={"data_idx": 1436, "id": eid}).json()
    assert {"task_name", "var_num", "task_description", "observation", "score", "done"} <= set(
        reset
    )
    assert reset["var_num"] == 0 and reset["task_name"].startswith("test-conductivity")
    shown = reset["task_description"] + "\n" + reset["observation"]
    step = http.post("/step", json={"action": "look around", "id": eid}).json()
    assert {"observation", "reward", "score", "done"} <= set(step) and not step["done"]
    http.post("/close", json={"id": eid})

    zid = server.zmq({"op": "create"})["id"]
    assert server.zmq({"op": "reset", "id": zid, "data_idx": 1436})["observation"] == shown
    server.zmq({"op": "close", "id": zid})

    async def pool_first_observation() -> str:
        pool = _core.EnvPool([_core.EnvServer("sciworld", str(server.http.base_url))])
        try:
            created = await pool.create("sciworld")
            first = await pool.reset(created.episode, 1436)
            await pool.close(created.episode)
            return str(first.observation)
        finally:
            await pool.shutdown()

    assert asyncio.run(pool_first_observation()) == shown


def test_out_of_range_data_idx_is_refused(server: ServerProc) -> None:
    assert server.get("/info")["num_tasks"] == 4639
    eid = server.post("/create")["id"]
    assert "out of range" in server.post("/reset", {"id": eid, "data_idx": 4639})["error"]
    reply = server.zmq({"op": "reset", "id": eid, "data_idx": -1})
    assert (reply["ok"], reply["code"]) == (False, "bad_data_idx")
    assert "[0, 4639)" in reply["error"]
    server.post("/close", {"id": eid})


def test_a_killed_jvm_fails_only_its_episode_and_is_replaced(spawn: Any) -> None:
    server = spawn("sciworld", "--env-option", "jvms=4", "--env-option", "warm=1")
    (victim_pid,) = server.get("/info")["jvm_pids"]  # the warm JVM: the first reset takes it
    a, b = (server.post("/create")["id"] for _ in range(2))
    server.post("/reset", {"id": a, "data_idx": 0})
    server.post("/reset", {"id": b, "data_idx": 2936})
    os.kill(victim_pid, signal.SIGKILL)
    assert wait_gone([victim_pid]) == []
    error = server.post("/step", {"id": a, "action": "look around"})["error"]
    assert f"pid {victim_pid}" in error and "died" in error
    assert "error" in server.post("/step", {"id": a, "action": "look around"})  # stays failed
    assert "error" not in server.post("/step", {"id": b, "action": "look around"})
    c = server.post("/create")["id"]
    reply = server.post("/reset", {"id": c, "data_idx": 120})
    assert reply["task_description"].startswith("Your task is to") and "error" not in reply
    assert "error" not in server.post("/step", {"id": c, "action": "look around"})
    reply = server.post("/reset", {"id": a, "data_idx": 1})  # the failed episode starts over
    assert "error" not in reply and not reply["done"]
    info = server.get("/info")
    assert info["jvms_replaced_total"] == 1 and victim_pid not in info["jvm_pids"]
    assert victim_pid not in java_children(server.proc.pid)


def test_memory_stays_flat_over_many_episodes(spawn: Any) -> None:
    server = spawn("sciworld", "--env-option", "jvms=2", "--env-option", "warm=1")
    starts = list(first_index().values())
    totals = []
    for i in range(50):
        eid = server.post("/create")["id"]
        server.post("/reset", {"id": eid, "data_idx": starts[i % len(starts)] + i})
        for action in ("look around", "inventory", "open door to kitchen", "go to kitchen"):
            server.post("/step", {"id": eid, "action": action})
        server.post("/close", {"id": eid})
        pid = server.proc.pid
        totals.append(rss_of(pid) + sum(rss_of(j) for j in java_children(pid)))
    assert len(java_children(server.proc.pid)) <= 2
    base = totals[9]
    assert max(totals[10:]) <= base * 1.15, [t // 2**20 for t in totals]


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_no_java_process_outlives_the_server(spawn: Any, how: str) -> None:
    server = spawn("sciworld", "--env-option", "warm=2")
    eid = server.post("/create")["id"]
    server.post("/reset", {"id": eid, "data_idx": 5})  # one busy JVM, warm ones idle
    jvms = java_children(server.proc.pid)
    assert len(jvms) >= 2
    if how == "sigterm":
        assert server.terminate() == 0
    else:
        os.kill(server.proc.pid, signal.SIGKILL)  # no cleanup runs: die-on-exit must do it
        server.proc.wait(timeout=10)
    assert wait_gone(jvms) == []


def test_without_java_the_server_refuses_to_start_and_says_how(tmp_path: Any) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "agentgym_envs.server", "sciworld", "--port", str(free_port())],
        env={**os.environ, "PATH": str(tmp_path)},  # nothing on PATH: no java
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "needs a Java runtime" in done.stderr and "default-jre-headless" in done.stderr
