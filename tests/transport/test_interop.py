"""Rust and pure-pyzmq peers over real sockets (tcp loopback and ipc)."""

from __future__ import annotations

import pytest

from agentgym_rl import _core
from agentgym_rl.wire import GroupReceiver, GroupSender

from .conftest import FAST, WAIT, Worker, payload
from .pyzmq_receiver import PyzmqGroupReceiver
from .pyzmq_sender import PyzmqGroupSender

N = 40

SENDERS = {"rust": GroupSender, "pyzmq": PyzmqGroupSender}
RECEIVERS = {"rust": GroupReceiver, "pyzmq": PyzmqGroupReceiver}


@pytest.mark.parametrize("receiver_kind", ["rust", "pyzmq"])
@pytest.mark.parametrize("sender_kind", ["rust", "pyzmq"])
def test_stream_in_order(endpoint: str, sender_kind: str, receiver_kind: str) -> None:
    with RECEIVERS[receiver_kind](endpoint, window=4) as rx:
        tx = SENDERS[sender_kind](rx.endpoint, "peer-a", **FAST)

        def produce() -> list[int]:
            return [tx.send(payload("a", i), WAIT) for i in range(N)]

        worker = Worker(produce)
        got = [rx.recv_seq(WAIT) for _ in range(N)]
        assert worker.result() == list(range(N))
        assert got == [("peer-a", i, payload("a", i)) for i in range(N)]
        # The last ack travels while nobody calls recv; flush waits for it.
        flush = Worker(lambda: tx.flush(WAIT))
        if receiver_kind == "pyzmq":
            assert rx.recv(0.2) is None  # lets the pure-Python receiver pump the last acks
        flush.result()
        assert tx.stats()["unacked"] == 0 and rx.stats()["duplicates"] == 0
        tx.close()


def test_many_senders_rust_and_pyzmq_into_one_rust_receiver(free_port: int) -> None:
    with GroupReceiver(f"tcp://127.0.0.1:{free_port}", window=3) as rx:
        senders = [GroupSender(rx.endpoint, f"r{k}", **FAST) for k in range(2)]
        senders += [PyzmqGroupSender(rx.endpoint, f"p{k}", **FAST) for k in range(2)]
        workers = [
            Worker(lambda tx=tx: [tx.send(payload(tx.sender_id, i), WAIT) for i in range(20)])
            for tx in senders
        ]
        seen = {rx.recv_seq(WAIT)[:2] for _ in range(80)}
        for w in workers:
            w.result()
        assert seen == {(tx.sender_id, i) for tx in senders for i in range(20)}
        for tx in senders:
            tx.close()


def test_send_times_out_without_credit_then_succeeds(free_port: int) -> None:
    with GroupReceiver(f"tcp://127.0.0.1:{free_port}", window=2) as rx:
        with GroupSender(rx.endpoint, "t", **FAST) as tx:
            tx.wait_connected(WAIT)
            tx.send(b"0", WAIT)
            tx.send(b"1", WAIT)
            with pytest.raises(_core.TransportTimeout):
                tx.send(b"2", 0.1)
            assert tx.stats()["sent"] == 2  # nothing queued by the failed call
            assert rx.recv(WAIT) == ("t", b"0")
            assert tx.send(b"2", WAIT) == 2


def test_pyzmq_sender_times_out_without_credit(free_port: int) -> None:
    with GroupReceiver(f"tcp://127.0.0.1:{free_port}", window=1) as rx:
        tx = PyzmqGroupSender(rx.endpoint, "pt", **FAST)
        tx.send(b"0", WAIT)
        with pytest.raises(_core.TransportTimeout):
            tx.send(b"1", 0.1)
        assert tx.stats()["sent"] == 1
        tx.close()


def test_send_times_out_when_nobody_listens(free_port: int) -> None:
    with GroupSender(f"tcp://127.0.0.1:{free_port}", "lonely", **FAST) as tx:
        with pytest.raises(_core.TransportTimeout):
            tx.send(b"x", 0.2)
    with pytest.raises(_core.TransportClosed):
        tx.send(b"x", 0.2)
