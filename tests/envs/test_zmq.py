"""The native ZeroMQ protocol (DEALER and REQ clients, msgpack, batches) against real servers."""

from __future__ import annotations

import msgpack
import zmq
from tests.envs.conftest import ServerProc


def test_lifecycle_over_zmq(babyai: ServerProc) -> None:
    created = babyai.zmq({"op": "create", "req": 1})
    assert created["ok"] is True and created["req"] == 1
    eid = created["id"]
    reset = babyai.zmq({"op": "reset", "req": "r", "id": eid, "data_idx": 7})
    assert reset["ok"] and reset["req"] == "r" and reset["observation"].startswith("Your goal: ")
    step = babyai.zmq({"op": "step", "id": eid, "action": "turn left"})
    assert step["ok"] and {"observation", "reward", "score", "done"} <= set(step)
    obs = babyai.zmq({"op": "observation", "id": eid})
    assert obs["observation"] == step["observation"]
    assert babyai.zmq({"op": "available_actions", "id": eid})["actions"][0] == "turn left"
    # Episodes are shared with the HTTP front end.
    assert babyai.get("/observation", id=eid) == obs["observation"]
    assert babyai.zmq({"op": "close", "id": eid}) == {
        "ok": True,
        "id": eid,
        "closed": True,
        "req": None,
    }
    ping = babyai.zmq({"op": "ping"})
    assert ping["ok"] and ping["live_episodes"] >= 0 and ping["rss_bytes"] > 0


def test_batched_step_reports_per_episode(babyai: ServerProc) -> None:
    ids = [babyai.zmq({"op": "create"})["id"] for _ in range(4)]
    resets = babyai.zmq(
        {
            "op": "batch",
            "req": 5,
            "ops": [{"op": "reset", "id": e, "data_idx": i} for i, e in enumerate(ids)],
        }
    )
    assert resets["ok"] and resets["req"] == 5 and all(r["ok"] for r in resets["results"])
    ops = [{"op": "step", "id": e, "action": "turn right"} for e in ids]
    ops += [
        {"op": "step", "id": 10**6, "action": "x"},
        {"op": "step", "id": ids[0]},
        "junk",
        {"op": "batch"},
    ]
    reply = babyai.zmq({"op": "batch", "ops": ops})
    results = reply["results"]
    assert len(results) == len(ops)
    assert all(r["ok"] and r["done"] is False for r in results[:4])
    assert [r.get("code") for r in results[4:]] == [
        "unknown_episode",
        "bad_request",
        "bad_request",
        "bad_request",
    ]
    closed = babyai.zmq({"op": "batch", "ops": [{"op": "close", "id": e} for e in ids]})
    assert all(r["closed"] for r in closed["results"])


def test_bad_messages_get_errors_and_others_keep_working(babyai: ServerProc) -> None:
    eid = babyai.zmq({"op": "create"})["id"]
    babyai.zmq({"op": "reset", "id": eid, "data_idx": 0})
    bad = [
        b"\xc1",  # never-used msgpack byte
        msgpack.packb([1, 2]),
        msgpack.packb({"req": 3}),
        msgpack.packb({"op": "fly"}),
        msgpack.packb({"op": "step", "id": "x", "action": "turn left"}),
        msgpack.packb({"op": "step", "id": eid, "action": None}),
        msgpack.packb({"op": "reset", "id": eid, "data_idx": -5}),
        msgpack.packb({"op": "batch", "ops": 3}),
    ]
    for raw in bad:
        reply = babyai.zmq(raw)
        assert reply["ok"] is False and reply["code"] in ("bad_request", "bad_data_idx"), (
            raw,
            reply,
        )
        assert reply["error"]
    assert babyai.zmq({"op": "step", "id": eid, "action": "turn left"})["ok"]
    babyai.zmq({"op": "close", "id": eid})


def test_req_socket_envelope(textcraft: ServerProc) -> None:
    ctx = zmq.Context.instance()
    req = ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.setsockopt(zmq.RCVTIMEO, 10_000)
    req.connect(f"tcp://127.0.0.1:{textcraft.zmq_port}")
    try:
        req.send(msgpack.packb({"op": "create", "req": 9}))
        reply = msgpack.unpackb(req.recv(), raw=False)
        assert (
            reply["ok"]
            and reply["req"] == 9
            and reply["observation"].startswith("Crafting commands:")
        )
        req.send(msgpack.packb({"op": "close", "id": reply["id"]}))
        assert msgpack.unpackb(req.recv(), raw=False)["closed"] is True
    finally:
        req.close()
