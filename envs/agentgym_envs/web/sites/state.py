"""Per-session site state: what an episode changed (cart, orders placed, posts written), kept
in memory by session id so parallel episodes never see each other's changes.

Contract: `SessionStore.get(session)` returns the session's state, made from `factory()` the
first time (the generated base state: a reset is a new session, instant); `reset(session)`
drops it. The store is bounded: sessions idle longer than `idle_s` are dropped, and beyond
`max_sessions` the least recently used goes. It is used from the site server's thread and the
env's worker thread (`prepare`), so the table is guarded by a lock; a state itself is changed
by the site's request handlers, one at a time on the server's event loop (and by `prepare`'s
sign-in, one attribute write before the episode's first request).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from agentgym_envs.web.sites.data import Order, Post, Thread

S = TypeVar("S")


class SessionStore(Generic[S]):
    def __init__(
        self, factory: Callable[[], S], max_sessions: int = 2048, idle_s: float = 1800.0
    ) -> None:
        self.factory = factory
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self.lock = threading.Lock()
        self._items: OrderedDict[str, tuple[float, S]] = OrderedDict()

    def get(self, session: str) -> S:
        now = time.monotonic()
        with self.lock:
            item = self._items.pop(session, None)
            state = self.factory() if item is None else item[1]
            self._items[session] = (now, state)
            while self._items:
                oldest, (used, _) = next(iter(self._items.items()))
                if len(self._items) > self.max_sessions or now - used > self.idle_s:
                    del self._items[oldest]
                else:
                    break
            return state

    def reset(self, session: str) -> None:
        with self.lock:
            self._items.pop(session, None)

    def __len__(self) -> int:
        with self.lock:
            return len(self._items)


@dataclass(slots=True)
class ShopState:
    cart: dict[int, int]
    logged_in: bool = False
    orders: list[Order] = field(default_factory=list)  # placed this session


@dataclass(slots=True)
class ForumState:
    replies: dict[int, list[Post]] = field(default_factory=dict)  # thread id -> new replies
    threads: list[Thread] = field(default_factory=list)  # created this session
