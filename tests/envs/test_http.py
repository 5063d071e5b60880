"""The AgentGym HTTP protocol against real BabyAI and TextCraft servers."""

from __future__ import annotations

import contextlib
import http.client
import json
import time

from tests.envs.conftest import ServerProc


def test_babyai_episode_lifecycle(babyai: ServerProc) -> None:
    created = babyai.post("/create")
    assert set(created) == {"id"}
    eid = created["id"]
    reset = babyai.post("/reset", {"id": eid, "data_idx": 9})
    assert set(reset) == {"observation", "reward", "score", "done", "invalid"}
    assert reset["observation"].startswith("Your goal: ")
    assert "Available actions: [" in reset["observation"]
    assert babyai.get("/observation", id=eid) == reset["observation"]
    actions = babyai.get("/available_actions", id=eid)
    assert actions[:3] == ["turn left", "turn right", "move forward"]
    step = babyai.post("/step", {"id": eid, "action": "turn left"})
    assert set(step) == {"observation", "reward", "score", "done", "invalid"}
    assert step["done"] is False
    assert babyai.post("/close", {"id": eid}) == {"id": eid, "closed": True}
    assert "error" in babyai.get("/observation", id=eid)


def test_textcraft_create_returns_first_observation(textcraft: ServerProc) -> None:
    created = textcraft.post("/create")
    assert {"id", "observation", "reward", "score", "done"} <= set(created)
    assert created["observation"].startswith("Crafting commands:\n")
    reset = textcraft.post("/reset", {"id": created["id"], "data_idx": 0})
    goal = reset["observation"].rsplit("Goal: craft ", 1)[1].rstrip(".")
    assert goal
    got = textcraft.post("/step", {"id": created["id"], "action": "get 1 oak log"})
    assert got["observation"] == "Got 1 oak log"
    textcraft.post("/close", {"id": created["id"]})


def test_bad_requests_leave_other_episodes_working(babyai: ServerProc) -> None:
    keep = babyai.post("/create")["id"]
    babyai.post("/reset", {"id": keep, "data_idx": 0})
    fresh = babyai.post("/create")["id"]
    done_id = babyai.post("/create")["id"]
    cases = [
        ("/step", {"id": 10**6, "action": "turn left"}, "unknown episode"),
        ("/step", {"id": fresh, "action": "turn left"}, "not been reset"),
        ("/step", {"id": keep}, "missing field 'action'"),
        ("/step", {"id": "0", "action": "turn left"}, "must be an integer"),
        ("/step", {"id": True, "action": "turn left"}, "must be an integer"),
        ("/step", {"id": keep, "action": 3}, "must be a string"),
        ("/reset", {"id": keep, "data_idx": -1}, "out of range"),
        ("/reset", {"id": keep}, "missing field 'data_idx'"),
        ("/close", {"id": 10**6}, "unknown episode"),
        ("/step", [1, 2], "JSON object"),
    ]
    for path, body, message in cases:
        r = babyai.http.post(path, json=body)
        assert r.status_code == 200 and message in r.json()["error"], (path, body, r.text)
    for raw in (b"{not json", b"", b"\xff\xfe"):
        r = babyai.http.post("/step", content=raw)
        assert r.status_code == 200 and "error" in r.json()
    assert "error" in babyai.get("/observation", id="abc")
    assert babyai.http.get("/nope").status_code == 404
    assert babyai.http.get("/step").status_code == 405

    # Step after done: the planner solves GoToRedBall, which ends the episode.
    babyai.post("/reset", {"id": done_id, "data_idx": 14})  # BabyAI-GoToRedBall-v0, seed 0
    result = babyai.post("/step", {"id": done_id, "action": "go to red ball 1"})
    assert result["done"] is True and result["reward"] > 0 and result["score"] == result["reward"]
    assert "is done" in babyai.post("/step", {"id": done_id, "action": "turn left"})["error"]

    after = babyai.post("/step", {"id": keep, "action": "turn right"})
    assert "error" not in after and after["observation"].startswith("Your goal: ")
    for eid in (keep, fresh, done_id):
        babyai.post("/close", {"id": eid})


def test_invalid_action_is_an_observation_not_an_error(babyai: ServerProc) -> None:
    eid = babyai.post("/create")["id"]
    babyai.post("/reset", {"id": eid, "data_idx": 3})
    r = babyai.post("/step", {"id": eid, "action": "fly to the moon"})
    assert r["done"] is False and r["reward"] == 0
    assert (
        r["observation"].startswith("Invalid action") and "Available actions:" in r["observation"]
    )
    babyai.post("/close", {"id": eid})


def test_health_and_info(babyai: ServerProc, textcraft: ServerProc) -> None:
    health = babyai.get("/health")
    assert health["status"] == "ok" and health["env"] == "babyai"
    assert health["rss_bytes"] > 10**6
    assert health["open_fds"] >= 3 and health["asyncio_tasks"] >= 1
    assert babyai.get("/info")["num_tasks"] is None
    assert textcraft.get("/info")["num_tasks"] == 551
    eid = textcraft.post("/create")["id"]
    assert "out of range" in textcraft.post("/reset", {"id": eid, "data_idx": 551})["error"]
    textcraft.post("/close", {"id": eid})


def test_an_idle_connection_outlives_a_client_s_keep_alive(babyai: ServerProc) -> None:
    """httpx drops a connection idle for 5 s; a server that closed its side at 5 s raced it, and
    agents whose turn took about that long lost calls (ReadError) mid-episode. The server keeps
    an idle connection longer than any client's pool does."""
    conn = http.client.HTTPConnection("127.0.0.1", babyai.http_port, timeout=10)
    try:
        conn.request("POST", "/create", body=b"{}", headers={"Content-Type": "application/json"})
        babyai.post("/close", {"id": json.loads(conn.getresponse().read())["id"]})
        sock = conn.sock
        assert sock is not None
        time.sleep(6.0)  # past httpx's 5 s expiry: the server must not have closed it
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):  # nothing to read: open
            assert sock.recv(1) != b"", "the server closed an idle connection"
        sock.setblocking(True)
        conn.request("POST", "/create", body=b"{}", headers={"Content-Type": "application/json"})
        again = json.loads(conn.getresponse().read())
        assert conn.sock is sock  # the same connection answered
        babyai.post("/close", {"id": again["id"]})
    finally:
        conn.close()


def test_a_trailing_slash_is_the_same_route_answered_in_place() -> None:
    """Every server built by `starlette_app` (env servers, web sites, the endpoint) answers
    `/x/` as `/x`, without a redirect; an unknown route goes to the app's handler."""
    import asyncio

    import httpx
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from agentgym_envs.server.asgi import starlette_app

    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse(request.url.path)

    async def missing(request: Request, exc: Exception) -> PlainTextResponse:
        return PlainTextResponse("none", status_code=404)

    app = starlette_app([Route("/x", hello)], {HTTPException: missing})

    async def get(path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://s") as client:
            return await client.get(path)

    plain, slashed, other = (asyncio.run(get(p)) for p in ("/x", "/x/", "/y/"))
    assert plain.status_code == slashed.status_code == 200 and slashed.text == "/x"
    assert other.status_code == 404 and other.text == "none"
