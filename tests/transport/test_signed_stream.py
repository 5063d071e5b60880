"""The group stream through the Python binding with a secret: the same secret streams, an
unsigned or wrongly signed sender stops with `AuthenticationError`, and the receiver counts
and names every refused peer."""

from __future__ import annotations

import time

import pytest

from agentgym_rl import _core

SECRET = b"0123456789abcdef0123456789abcdef"


def fast(endpoint: str, secret: bytes | None) -> _core.GroupSender:
    return _core.GroupSender(
        endpoint, "rollout-a", handshake_timeout_s=0.5, max_reconnect_interval_s=0.1, secret=secret
    )


def test_signed_groups_arrive() -> None:
    with _core.GroupReceiver(secret=SECRET) as rx, fast(rx.endpoint, SECRET) as tx:
        for i in range(5):
            tx.send(b"group %d" % i, 10)
        got = [rx.recv(10) for _ in range(5)]
        assert [g[1] for g in got if g] == [b"group %d" % i for i in range(5)]
        tx.flush(10)
        assert rx.stats()["unauthenticated"] == 0 and tx.stats()["unauthenticated"] == 0


@pytest.mark.parametrize(
    ("sender_secret", "receiver_secret", "words"),
    [
        (None, SECRET, "not signed"),
        (SECRET[::-1], SECRET, "same secret"),
        (SECRET, None, "not signed"),
    ],
)
def test_a_secret_mismatch_stops_the_sender_and_is_counted(
    sender_secret: bytes | None, receiver_secret: bytes | None, words: str
) -> None:
    with _core.GroupReceiver(secret=receiver_secret) as rx, fast(rx.endpoint, sender_secret) as tx:
        with pytest.raises(_core.AuthenticationError, match=words):
            tx.wait_connected(10)
        with pytest.raises(_core.AuthenticationError):
            tx.send(b"group", 1)
        assert rx.recv(0.2) is None
        if receiver_secret is not None:
            deadline = time.monotonic() + 5
            while rx.stats()["unauthenticated"] == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert rx.stats()["unauthenticated"] >= 1
            peer, reason = rx.take_refusals()[0]
            assert peer.startswith("tcp://127.0.0.1:") and reason


def test_a_short_secret_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        _core.GroupReceiver(secret=b"short")
