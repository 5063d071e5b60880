"""A command stopped by SIGINT or SIGTERM unwinds as on Ctrl-C, within a bound.

Contract: inside `with interruptible(name, bound_s) as stop:` (main thread only), SIGTERM raises
`KeyboardInterrupt` as SIGINT does, so `finally` blocks run (vLLM's engine core shut down through
its own API, env servers stopped, logs closed); `stop.signal` names the first signal. A second
signal, or `bound_s` seconds of unwinding, ends the process at once (exit 128 + the signal's
number, after a line `NAME: stopped by SIG...` on stderr) and its watchdog (`ownership.owning`)
stops whatever is left. The bound also covers a `KeyboardInterrupt` that a C extension's wait
swallowed (pyzmq's poll retries after EINTR: vLLM waiting for its engine core to start never
sees it). Leaving the block restores the previous handlers.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

BOUND_S = 10.0
"""How long a stopped command may take to unwind before it exits regardless."""


@dataclass
class Stop:
    """Which signal stopped the command, if one did."""

    signal: signal.Signals | None = None

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signal) if self.signal is not None else 0


@contextmanager
def interruptible(name: str, bound_s: float = BOUND_S) -> Iterator[Stop]:
    """Turn SIGINT and SIGTERM into a bounded unwinding (module docstring)."""
    stop = Stop()
    caught = (signal.SIGINT, signal.SIGTERM)

    def end_now(signum: int, why: str) -> None:
        print(f"{name}: stopped by {signal.Signals(signum).name} ({why})", file=sys.stderr)
        sys.stderr.flush()
        os._exit(128 + signum)

    def handle(signum: int, _frame: FrameType | None) -> Any:
        if stop.signal is not None:
            end_now(signum, "a second signal: not waiting for the first to unwind")
        stop.signal = signal.Signals(signum)
        why = f"it had not unwound within {bound_s:g} s; its watchdog stops the rest"
        deadline = threading.Timer(bound_s, end_now, args=(signum, why))
        deadline.daemon = True
        deadline.start()
        raise KeyboardInterrupt

    before = {s: signal.signal(s, handle) for s in caught}
    try:
        yield stop
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


__all__ = ["BOUND_S", "Stop", "interruptible"]
