"""Server lifecycle: idle reaping, SIGTERM shutdown, flat episode count over long runs, the
observation length guard."""

from __future__ import annotations

import time
from collections.abc import Callable

import msgpack
from tests.envs.conftest import ServerProc

from waiting import wait_until


def test_idle_episodes_are_reaped(spawn: Callable[..., ServerProc]) -> None:
    # The busy episode is touched every ~50 ms; a timeout of 2 s leaves room for a loaded
    # machine's pauses between those touches (0.5 s once reaped it on CI).
    server = spawn("textcraft", "--idle-timeout", "2")
    idle = server.post("/create")["id"]
    busy = server.post("/create")["id"]
    assert server.live() == 2

    def busy_alive_idle_reaped() -> bool:
        server.post("/step", {"id": busy, "action": "inventory"})  # keeps `busy` fresh
        return server.get("/health")["reaped_total"] >= 1  # probing `idle` would refresh it

    wait_until(busy_alive_idle_reaped, 20, "the idle episode reaped, the busy one kept")
    assert "unknown episode" in server.post("/step", {"id": idle, "action": "inventory"})["error"]
    assert "error" not in server.post("/step", {"id": busy, "action": "inventory"})
    assert server.live() == 1


def test_sigterm_closes_episodes_and_exits_zero(spawn: Callable[..., ServerProc]) -> None:
    server = spawn("babyai")
    for i in range(3):
        eid = server.zmq({"op": "create"})["id"]
        server.zmq({"op": "reset", "id": eid, "data_idx": i})
    assert server.live() == 3
    assert server.terminate() == 0


def test_long_create_close_run_stays_flat(babyai: ServerProc) -> None:
    start_live = babyai.live()
    for round_ in range(6):
        ops = [{"op": "create"} for _ in range(50)]
        ids = [r["id"] for r in babyai.zmq({"op": "batch", "ops": ops})["results"]]
        babyai.zmq(
            {
                "op": "batch",
                "ops": [{"op": "reset", "id": e, "data_idx": i} for i, e in enumerate(ids)],
            }
        )
        babyai.zmq(
            {"op": "batch", "ops": [{"op": "step", "id": e, "action": "move forward"} for e in ids]}
        )
        babyai.zmq({"op": "batch", "ops": [{"op": "close", "id": e} for e in ids]})
        if round_ == 1:
            rss_after_warmup = babyai.get("/health")["rss_bytes"]
    for i in range(100):  # and over HTTP
        eid = babyai.post("/create")["id"]
        babyai.post("/reset", {"id": eid, "data_idx": i})
        babyai.post("/close", {"id": eid})
    health = babyai.get("/health")
    assert health["live_episodes"] == start_live
    assert health["rss_bytes"] < rss_after_warmup + 32 * 2**20, (health, rss_after_warmup)


def test_long_observation_is_truncated_with_marker(spawn: Callable[..., ServerProc]) -> None:
    server = spawn("textcraft", "--max-obs-chars", "200")
    created = server.post("/create")
    obs = created["observation"]
    assert len(obs) <= 200 and "[... observation truncated: showing" in obs
    again = server.zmq({"op": "reset", "id": created["id"], "data_idx": 5})
    assert len(again["observation"]) <= 200 and again["observation"].endswith("characters]")


def test_a_blocking_env_keeps_answering_health_probes(spawn: Callable[..., ServerProc]) -> None:
    """A `blocking` env's calls run on its own thread, in order: while a 2 s step runs, health
    probes over both protocols answer at once, and the steps still come back in order."""
    server = spawn("noop", "--env-option", "sleep_s=2")
    eid = server.post("/create")["id"]
    server.post("/reset", {"id": eid, "data_idx": 0})
    t0 = time.monotonic()
    for req in (1, 2):
        server.dealer.send(msgpack.packb({"op": "step", "req": req, "id": eid, "action": "noop"}))
    assert server.get("/health")["live_episodes"] == 1
    server.dealer.send(msgpack.packb({"op": "health", "req": "h"}))
    first = msgpack.unpackb(server.dealer.recv(), raw=False)
    assert (
        first["req"] == "h" and first["ok"]
    )  # before the first step's reply: not queued behind it
    steps = [msgpack.unpackb(server.dealer.recv(), raw=False) for _ in range(2)]
    assert [s["req"] for s in steps] == [1, 2] and all(s["observation"] == "ok" for s in steps)
    assert time.monotonic() - t0 >= 4.0  # one at a time
    assert server.terminate() == 0
