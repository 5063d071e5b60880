"""Restarts: nothing lost, nothing delivered twice; typed errors for every failure."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import zmq

from agentgym_rl import _core
from agentgym_rl.wire import GroupReceiver, GroupSender
from waiting import wait_until

from .conftest import FAST, WAIT, Worker, payload
from .pyzmq_protocol import pack
from .pyzmq_receiver import PyzmqGroupReceiver
from .pyzmq_sender import PyzmqGroupSender

RECEIVERS = {"rust": GroupReceiver, "pyzmq": PyzmqGroupReceiver}
SENDERS = {"rust": GroupSender, "pyzmq": PyzmqGroupSender}


def wait_for(what: str, cond) -> None:  # type: ignore[no-untyped-def]
    wait_until(cond, WAIT, what, poll_s=0.002)


@pytest.mark.parametrize(
    ("sender_kind", "receiver_kind"), [("rust", "rust"), ("rust", "pyzmq"), ("pyzmq", "rust")]
)
def test_receiver_restart_mid_stream(endpoint: str, sender_kind: str, receiver_kind: str) -> None:
    n, first = 30, 5
    rx = RECEIVERS[receiver_kind](endpoint, window=4)
    tx = SENDERS[sender_kind](rx.endpoint, "r", **FAST)
    worker = Worker(lambda: [tx.send(payload("r", i), WAIT) for i in range(n)])
    seen = [rx.recv_seq(WAIT) for _ in range(first)]
    # Close only once the sender has the acks (the pyzmq sender reads them inside its blocked
    # send()), so that nothing is delivered twice.
    wait_for("acks", lambda: tx.stats()["acked"] == first)
    rx.close()
    rx = RECEIVERS[receiver_kind](endpoint, window=4)
    while len(seen) < n:
        got = rx.recv_seq(WAIT)
        assert got is not None, f"stalled after {len(seen)}"
        seen.append(got)
    assert worker.result() == list(range(n))
    assert seen == [("r", i, payload("r", i)) for i in range(n)]
    assert rx.recv(0.1) is None
    tx.close()
    rx.close()


CHILD = """
import sys
from agentgym_rl._core import GroupSender
tx = GroupSender(sys.argv[1], "child", heartbeat_s=0.05, peer_timeout_s=0.5)
for i in range(int(sys.argv[2])):
    tx.send(f"{sys.argv[3]}:{i}".encode(), 10.0)
print("sent", flush=True)
sys.stdin.read()
"""


def spawn_sender(endpoint: str, n: int, tag: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, endpoint, str(n), tag],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "sent"  # synchronise on the child's handshake+sends
    return proc


def end(proc: subprocess.Popen[str]) -> None:
    proc.kill()  # by PID
    proc.wait(WAIT)


@pytest.mark.process
def test_restarted_sender_process_is_reset_not_deduplicated(free_port: int) -> None:
    with GroupReceiver(f"tcp://127.0.0.1:{free_port}", window=8) as rx:
        old = spawn_sender(rx.endpoint, 3, "old")
        try:
            assert [rx.recv_seq(WAIT) for _ in range(3)] == [
                ("child", i, f"old:{i}".encode()) for i in range(3)
            ]
        finally:
            end(old)
        new = spawn_sender(rx.endpoint, 2, "new")
        try:
            got = [rx.recv_seq(WAIT) for _ in range(2)]
        finally:
            end(new)
        assert got == [("child", i, f"new:{i}".encode()) for i in range(2)]
        stats = rx.stats()
        assert stats["duplicates"] == 0 and stats["senders"] == 1 and stats["handshakes"] >= 2


def test_protocol_error_when_the_receiver_rejects(free_port: int) -> None:
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(f"tcp://127.0.0.1:{free_port}")
    try:
        with GroupSender(f"tcp://127.0.0.1:{free_port}", "x", **FAST) as tx:
            rid, _hello = router.recv_multipart()
            router.send_multipart([rid, pack("reject", reason="test says no")])
            with pytest.raises(_core.ProtocolError):
                tx.send(b"x", WAIT)
    finally:
        router.close()
        ctx.term()


def test_endpoint_errors_are_typed(free_port: int) -> None:
    for bad in ["tcp://*:5555", "ipc://*", "udp://x", "localhost:5"]:
        with pytest.raises(_core.InvalidEndpointError):
            GroupReceiver(bad)
    with GroupReceiver(f"tcp://127.0.0.1:{free_port}") as rx:
        with pytest.raises(_core.TransportSocketError):
            GroupReceiver(rx.endpoint)
    with pytest.raises(_core.InvalidEndpointError):
        GroupSender("tcp://127.0.0.1:0")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_use_after_fork_is_a_typed_error_and_a_new_sender_works(free_port: int) -> None:
    with GroupReceiver(f"tcp://127.0.0.1:{free_port}") as rx:
        tx = GroupSender(rx.endpoint, "parent", **FAST)
        tx.wait_connected(WAIT)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: old object fails clearly, a fresh one works (new runtime)
            code = 1
            try:
                try:
                    tx.send(b"x", 0.1)
                except _core.TransportForkedError:
                    fresh = GroupSender(rx.endpoint, "child", **FAST)
                    fresh.send(b"from-child", WAIT)
                    fresh.flush(WAIT)
                    code = 0
            finally:
                os.write(w, bytes([code]))
                os._exit(code)
        os.close(w)
        assert rx.recv(WAIT) == ("child", b"from-child")
        assert os.read(r, 1) == b"\x00"
        os.close(r)
        os.waitpid(pid, 0)
        tx.send(b"still-works", WAIT)
        assert rx.recv(WAIT) == ("parent", b"still-works")
        tx.close()


def test_every_transport_error_variant_has_its_own_exception() -> None:
    names = [
        "TransportTimeout",
        "TransportClosed",
        "ProtocolError",
        "TransportSocketError",
        "InvalidEndpointError",
        "TransportForkedError",
        "TransportRuntimeError",
    ]
    classes = [getattr(_core, n) for n in names]
    assert len(set(classes)) == len(names)
    for c in classes:
        assert issubclass(c, _core.TransportError) and issubclass(c, _core.AgentGymError)
