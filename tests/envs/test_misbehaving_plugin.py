"""A plugin env that misbehaves (tests/envs/misbehaving.py), served by reference as a user's
would be: an env that raises in reset or step, returns an observation that is not text or one of
10 MB, or whose episodes' close raises gets a clear error for that request (or a truncated
observation) and the server goes on; one that hangs past `--call-timeout` ends its server with
code 75 and a line saying why (so that a supervisor restarts it). Real server processes."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
from tests.envs.conftest import ServerProc

REF = "tests.envs.misbehaving:MisbehavingEnvironment"


def _episode(server: ServerProc, idx: int) -> tuple[int, dict]:
    eid = server.post("/create")["id"]
    return eid, server.post("/reset", {"id": eid, "data_idx": idx})


def test_a_misbehaving_env_gets_clear_errors_and_the_server_goes_on(
    spawn: Callable[..., ServerProc],
) -> None:
    server = spawn(REF, "--max-obs-chars", "4000")
    _, reply = _episode(server, 3)
    assert "environment error: RuntimeError: reset exploded" in reply["error"]
    eid, _ = _episode(server, 4)
    assert (
        "ValueError: step exploded" in server.post("/step", {"id": eid, "action": "win"})["error"]
    )
    eid, _ = _episode(server, 5)
    error = server.post("/step", {"id": eid, "action": "win"})["error"]
    assert "an observation must be a string, got int" in error
    eid, _ = _episode(server, 6)
    big = server.post("/step", {"id": eid, "action": "wait"})["observation"]
    assert len(big) <= 4000 and f"of {10 << 20} characters" in big
    # over ZMQ the same: an error reply, not a dead socket
    assert server.zmq({"op": "step", "id": eid + 99, "action": "x"})["code"] == "unknown_episode"
    eid, _ = _episode(server, 0)
    assert server.post("/step", {"id": eid, "action": "win"})["reward"] == 1.0
    assert server.post("/close", {"id": eid}) == {"id": eid, "closed": True}  # close raised
    health = server.get("/health")
    assert health["status"] == "ok" and server.proc.poll() is None


def test_an_env_that_hangs_ends_its_server_with_a_reason(
    spawn: Callable[..., ServerProc],
) -> None:
    server = spawn(REF, "--call-timeout", "1", "--env-option", "hang_s=60")
    eid, _ = _episode(server, 7)
    t0 = time.monotonic()
    try:
        server.http.post("/step", json={"id": eid, "action": "win"}, timeout=20.0)
    except httpx.HTTPError:
        pass  # the server went away mid-request
    assert server.proc.wait(timeout=20) == 75
    assert time.monotonic() - t0 < 10
    log = Path(server.server.child.log_path).read_text()
    assert "the env hangs; exiting (code 75)" in log
