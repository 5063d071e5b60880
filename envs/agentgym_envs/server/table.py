"""The episode table: the id-based env interface both protocols dispatch into.

`EpisodeTable` maps integer ids to live `Episode`s and enforces the protocol rules: unknown ids,
step before reset, step after done, out-of-range task ids, over-long observations (truncated with
a visible marker), idle reaping. What an env's code raises, or returns of the wrong kind (not a
`StepResult`, an observation that is not text, a reward that is not a number), is an `INTERNAL`
error of that request, never the server's end; `hung_for()` is how long the env call in hand has
run (the server's watchdog ends a process whose env hangs, so that it can be restarted). `dispatch(op, fields)` validates a request's fields (present,
right type) and returns a JSON/msgpack-ready result or raises `EnvError`; the HTTP and ZMQ front
ends only translate transport framing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from agentgym_envs.server.base import EnvError, Environment, Episode, ErrorCode, StepResult

log = logging.getLogger("agentgym_envs.server")

T = TypeVar("T")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Resident set size of this process (current on Linux, peak elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def open_fds() -> int | None:
    """File descriptors this process holds open (None where /proc is missing)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def asyncio_tasks() -> int | None:
    """Tasks of the running event loop (None outside one)."""
    try:
        return len(asyncio.all_tasks())
    except RuntimeError:
        return None


@dataclass(slots=True)
class _Slot:
    episode: Episode
    last_used: float
    was_reset: bool = False
    done: bool = False


class EpisodeTable:
    """Live episodes of one environment, addressed by increasing integer ids (never reused)."""

    def __init__(
        self,
        env: Environment,
        *,
        idle_timeout_s: float | None = 600.0,
        max_obs_chars: int = 16_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.env = env
        self.idle_timeout_s = idle_timeout_s if idle_timeout_s and idle_timeout_s > 0 else None
        self.max_obs_chars = max_obs_chars
        self._clock = clock
        self._slots: dict[int, _Slot] = {}
        self._next_id = 0
        self._started = clock()
        self._call_since: float | None = None
        self.reaped_total = 0
        # `Environment.blocking`: every call that touches episodes runs on this one thread
        self._worker = (
            ThreadPoolExecutor(1, thread_name_prefix=f"env-{env.name}") if env.blocking else None
        )

    @property
    def blocking(self) -> bool:
        """Whether env calls run on the worker thread (`Environment.blocking`)."""
        return self._worker is not None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)`, a call into this table: inline, or on the env's worker thread when the env
        is `blocking` (one call at a time, in arrival order, as inline)."""
        if self._worker is None:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)

    def shutdown(self) -> None:
        """Close every episode, then the env itself (after any call still running)."""
        if self._worker is not None:
            self._worker.shutdown(wait=True)
        self.close_all()
        try:
            self.env.close()
        except Exception:
            log.exception("closing the environment raised")

    # -- the interface -------------------------------------------------------------------------
    def create(self) -> dict[str, Any]:
        eid = self._next_id
        episode = self._call(eid, self.env.new_episode)
        self._next_id += 1
        slot = _Slot(episode, self._clock())
        self._slots[eid] = slot
        if not self.env.create_resets:
            return {"id": eid}
        return {"id": eid, **self._apply(eid, slot, lambda: episode.reset(0), resetting=True)}

    def reset(self, eid: int, data_idx: int) -> dict[str, Any]:
        slot = self._slot(eid)
        self.env.check_data_idx(data_idx)
        return self._apply(eid, slot, lambda: slot.episode.reset(data_idx), resetting=True)

    def step(self, eid: int, action: str) -> dict[str, Any]:
        slot = self._ready_slot(eid)
        if slot.done:
            raise EnvError(ErrorCode.EPISODE_DONE, f"episode {eid} is done: reset or close it")
        return self._apply(eid, slot, lambda: slot.episode.step(action), resetting=False)

    def observation(self, eid: int) -> str:
        slot = self._ready_slot(eid)
        return self._guard(self._call(eid, slot.episode.observation), eid)

    def available_actions(self, eid: int) -> list[str]:
        slot = self._ready_slot(eid)
        actions = self._call(eid, slot.episode.available_actions)
        if not isinstance(actions, list | tuple) or not all(isinstance(a, str) for a in actions):
            raise _wrong(eid, "available_actions() must return a list of strings", actions)
        return list(actions)

    def episode(self, eid: int) -> Episode:
        """The live, reset episode `eid` (for a front end's dialect-specific reply fields)."""
        return self._ready_slot(eid).episode

    def close(self, eid: int) -> dict[str, Any]:
        slot = self._slots.pop(eid, None)
        if slot is None:
            raise EnvError(ErrorCode.UNKNOWN_EPISODE, f"unknown episode id {eid}")
        self._close_episode(eid, slot.episode)
        return {"id": eid, "closed": True}

    def hung_for(self) -> float:
        """Seconds the env call in hand has run (0 when none is running)."""
        since = self._call_since
        return 0.0 if since is None else self._clock() - since

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "env": self.env.name,
            "live_episodes": len(self._slots),
            "created_total": self._next_id,
            "reaped_total": self.reaped_total,
            "rss_bytes": rss_bytes(),
            "open_fds": open_fds(),
            "asyncio_tasks": asyncio_tasks(),
            "uptime_s": round(self._clock() - self._started, 3),
        }

    # -- lifecycle -----------------------------------------------------------------------------
    def reap_idle(self) -> int:
        """Close episodes unused for longer than the idle timeout; returns how many."""
        if self.idle_timeout_s is None:
            return 0
        deadline = self._clock() - self.idle_timeout_s
        stale = [eid for eid, s in self._slots.items() if s.last_used < deadline]
        for eid in stale:
            self._close_episode(eid, self._slots.pop(eid).episode)
        self.reaped_total += len(stale)
        if stale:
            log.info("reaped %d idle episode(s)", len(stale))
        return len(stale)

    def close_all(self) -> None:
        while self._slots:
            eid, slot = self._slots.popitem()
            self._close_episode(eid, slot.episode)

    def __len__(self) -> int:
        return len(self._slots)

    # -- internals -----------------------------------------------------------------------------
    def _slot(self, eid: int) -> _Slot:
        slot = self._slots.get(eid)
        if slot is None:
            raise EnvError(ErrorCode.UNKNOWN_EPISODE, f"unknown episode id {eid}")
        slot.last_used = self._clock()
        return slot

    def _ready_slot(self, eid: int) -> _Slot:
        slot = self._slot(eid)
        if not slot.was_reset:
            raise EnvError(
                ErrorCode.NOT_RESET, f"episode {eid} has not been reset: call reset first"
            )
        return slot

    def _apply(
        self, eid: int, slot: _Slot, fn: Callable[[], StepResult], *, resetting: bool
    ) -> dict[str, Any]:
        result = self._call(eid, fn)
        if not isinstance(result, StepResult):
            raise _wrong(eid, "reset() and step() must return a StepResult", result)
        numbers = (result.reward, result.score)
        if any(isinstance(x, bool) or not isinstance(x, int | float) for x in numbers):
            raise _wrong(eid, "a StepResult's reward and score must be numbers", numbers)
        observation = self._guard(result.observation, eid)
        if resetting:
            slot.was_reset = True
        slot.done = bool(result.done)
        return {
            "observation": observation,
            "reward": float(result.reward),
            "score": float(result.score),
            "done": bool(result.done),
            "invalid": bool(result.invalid),
        }

    def _call(self, eid: int, fn: Callable[[], Any]) -> Any:
        self._call_since = self._clock()
        try:
            return fn()
        except EnvError:
            raise
        except Exception as exc:  # an env bug must not take the server down
            log.exception("episode %d raised", eid)
            raise EnvError(
                ErrorCode.INTERNAL, f"environment error: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            self._call_since = None

    def _close_episode(self, eid: int, episode: Episode) -> None:
        try:
            episode.close()
        except Exception:
            log.exception("closing episode %d raised", eid)

    def _guard(self, text: Any, eid: int) -> str:
        if not isinstance(text, str):
            raise _wrong(eid, "an observation must be a string", text)
        if len(text) <= self.max_obs_chars:
            return text
        marker = f"\n[... observation truncated: showing {{}} of {len(text)} characters]"
        keep = max(0, self.max_obs_chars - len(marker) - 8)
        return text[:keep] + marker.format(keep)


def _wrong(eid: int, rule: str, got: Any) -> EnvError:
    """An env that returned the wrong kind of value: the request's error, logged."""
    shown = repr(got)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    log.error("episode %d: %s, got %s", eid, rule, shown)
    return EnvError(ErrorCode.INTERNAL, f"environment error: {rule}, got {type(got).__name__}")


# -- request validation and dispatch -----------------------------------------------------------
def int_field(fields: Mapping[str, Any], key: str) -> int:
    if key not in fields:
        raise EnvError(ErrorCode.BAD_REQUEST, f"missing field '{key}'")
    value = fields[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise EnvError(ErrorCode.BAD_REQUEST, f"field '{key}' must be an integer, got {value!r}")
    return value


def str_field(fields: Mapping[str, Any], key: str) -> str:
    if key not in fields:
        raise EnvError(ErrorCode.BAD_REQUEST, f"missing field '{key}'")
    value = fields[key]
    if not isinstance(value, str):
        raise EnvError(ErrorCode.BAD_REQUEST, f"field '{key}' must be a string, got {value!r}")
    return value


def dispatch(table: EpisodeTable, op: str, fields: Mapping[str, Any]) -> Any:
    """Run one request. Returns the result body; raises `EnvError` for any refused request."""
    if op == "create":
        return table.create()
    if op == "reset":
        return table.reset(int_field(fields, "id"), int_field(fields, "data_idx"))
    if op == "step":
        return table.step(int_field(fields, "id"), str_field(fields, "action"))
    if op == "observation":
        return table.observation(int_field(fields, "id"))
    if op == "available_actions":
        return table.available_actions(int_field(fields, "id"))
    if op == "close":
        return table.close(int_field(fields, "id"))
    if op in ("health", "ping"):
        return table.health()
    if op == "info":
        return table.env.info()
    if op == "tools":
        return {"tools": [tool.wire() for tool in table.env.tool_set()]}
    raise EnvError(ErrorCode.BAD_REQUEST, f"unknown op {op!r}")
