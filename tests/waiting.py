"""Waiting in tests, one way: poll a condition under a deadline (the condition is the
synchronisation; the poll interval is not). `wait_until` returns the condition's first truthy
value and fails the test naming what was awaited (and `explain()`, what else the caller knows)
when the deadline passes first; `await_until` is the same for an async condition."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def _failure(what: str, timeout_s: float, explain: Callable[[], str] | None) -> AssertionError:
    more = f"\n{explain()}" if explain is not None else ""
    return AssertionError(f"not within {timeout_s:.0f} s: {what}{more}")


def wait_until(
    ready: Callable[[], T],
    timeout_s: float,
    what: str,
    *,
    poll_s: float = 0.05,
    explain: Callable[[], str] | None = None,
) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        got = ready()
        if got:
            return got
        if time.monotonic() > deadline:
            raise _failure(what, timeout_s, explain)
        time.sleep(poll_s)


async def await_until(
    ready: Callable[[], Awaitable[T]], timeout_s: float, what: str, *, poll_s: float = 0.05
) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        got = await ready()
        if got:
            return got
        if time.monotonic() > deadline:
            raise _failure(what, timeout_s, None)
        await asyncio.sleep(poll_s)
