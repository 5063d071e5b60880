"""Logging of messages refused for want of a valid signature, without flooding the log.

Each peer's first refusal is logged at once; after that at most one line per peer every
`every_s` seconds, with the count since the last line. Every refusal is counted."""

from __future__ import annotations

import logging
import time
from collections import Counter

log = logging.getLogger(__name__)


class RefusalLog:
    """Counts refusals per peer and logs them, rate-limited."""

    def __init__(self, wire: str, every_s: float = 60.0, max_peers: int = 1024) -> None:
        self.wire = wire
        self.every_s = every_s
        self.max_peers = max_peers
        self.total = 0
        self._unlogged: Counter[str] = Counter()
        self._last_logged: dict[str, float] = {}

    def note(self, peer: str, reason: str) -> None:
        self.total += 1
        now = time.monotonic()
        if len(self._last_logged) >= self.max_peers and peer not in self._last_logged:
            peer = "other peers"  # a flood from many addresses cannot grow this table
        self._unlogged[peer] += 1
        last = self._last_logged.get(peer)
        if last is not None and now - last < self.every_s:
            return
        count = self._unlogged.pop(peer)
        self._last_logged[peer] = now
        more = f" ({count} since the last report)" if count > 1 else ""
        log.warning("%s: refused a message from %s: %s%s", self.wire, peer, reason, more)
