"""The learner side of the rollout process: encoded groups out over `GroupSender`s.

Contract: `LearnerStream.send(payload)` hands one encoded group to one learner endpoint,
trying them round robin; each attempt waits at most `timeout_s` for credit. If no endpoint
takes it, `_core.TransportTimeout` is raised and nothing was queued, so the caller still owns
the group (the dispatcher puts it back in the buffer). Calls block: run them in a thread.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence

from agentgym_rl import _core


def default_sender_id() -> str:
    return f"rollout-{socket.gethostname()}-{os.getpid()}"


class LearnerStream:
    """Round robin over one `GroupSender` per learner endpoint."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        sender_id: str | None = None,
        timeout_s: float = 1.0,
        secret: bytes | None = None,
        **sender_options: float,
    ) -> None:
        if not endpoints:
            raise ValueError("at least one learner endpoint is needed")
        sid = sender_id or default_sender_id()
        self.senders = [
            _core.GroupSender(
                ep, f"{sid}/{i}" if len(endpoints) > 1 else sid, secret=secret, **sender_options
            )
            for i, ep in enumerate(endpoints)
        ]
        self.timeout_s = timeout_s
        self._next = 0

    def send(self, payload: bytes) -> int:
        """Queue `payload` on the next endpoint with credit; returns its sequence number."""
        last: _core.TransportTimeout | None = None
        for _ in range(len(self.senders)):
            sender = self.senders[self._next]
            self._next = (self._next + 1) % len(self.senders)
            try:
                return sender.send(payload, self.timeout_s)
            except _core.TransportTimeout as e:
                last = e
        assert last is not None
        raise last

    def flush(self, timeout_s: float) -> None:
        """Wait until every sent group is acknowledged, for at most `timeout_s` in all (raises
        TransportTimeout otherwise). An endpoint whose link is down is not waited for: its
        learner is gone (at a finished run's exit, for good; the link is lost 3 s after its
        last word) and acknowledges nothing until one comes back."""
        deadline = time.monotonic() + timeout_s
        late = 0
        for sender in self.senders:
            try:
                sender.flush(max(0.0, deadline - time.monotonic()), while_linked=True)
            except (_core.TransportLinkDown, _core.TransportTimeout):
                late += int(sender.stats()["unacked"])
        if late:
            raise _core.TransportTimeout(f"{late} sent groups not acknowledged")

    def linked(self) -> bool:
        """Whether a link to some learner is in force (lost 3 s after a learner's last word)."""
        return any(s.stats()["connected"] for s in self.senders)

    def stats(self) -> list[dict[str, int | bool]]:
        return [s.stats() for s in self.senders]

    def close(self) -> None:
        for sender in self.senders:
            sender.close()
