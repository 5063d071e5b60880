"""Processes a test left behind: found after each test module, named, stopped, reported.

Every process a test session starts carries `SESSION_ENV` in its environment (set before the
first test; children inherit it). After each module, a process that carries this session's
value but no longer descends from pytest (its parent died and it was reparented), and still
runs a few seconds later, is a leftover: it is killed, so it cannot eat the cores the rest of
the suite runs on, and recorded with the test that was running when it started (its inherited
``PYTEST_CURRENT_TEST``). The terminal summary lists them; a CI log then says which test leaks
instead of only running slow.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass

import psutil

SESSION_ENV = "AGENTGYM_RL_TEST_SESSION"
GRACE_S = 3.0
"""How long a stray may take to end on its own before it counts as left behind."""
WATCHDOG = "agentgym_rl/processes/watchdog.py"
KEEP_ENV = "AGENTGYM_RL_TEST_KEEP_LEFTOVERS"
"""Set to 1: leftovers are reported, not killed (to look at them)."""


@dataclass(frozen=True)
class Leftover:
    pid: int
    command: str
    started_by: str  # the test running when it was started
    found_after: str  # the module after which it was found


def start_session() -> None:
    """Mark this session's processes (children inherit the variable). Each pytest-xdist
    worker is a session of its own: another worker's processes are not this one's strays."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        os.environ.setdefault(SESSION_ENV, uuid.uuid4().hex)
    elif not os.environ.get(SESSION_ENV, "").endswith(f"-{worker}"):
        os.environ[SESSION_ENV] = f"{uuid.uuid4().hex}-{worker}"


def _descendants_of_pytest() -> set[int]:
    me = psutil.Process()
    return {me.pid} | {p.pid for p in me.children(recursive=True)}


def _strays(mark: str) -> list[psutil.Process]:
    """This session's running processes outside pytest's tree."""
    ours = _descendants_of_pytest()
    strays = []
    for proc in psutil.process_iter():
        try:
            if proc.pid in ours or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(SESSION_ENV) != mark:
                continue
            # a command's watchdog outlives it on purpose: it stops what the command left and
            # ends (tests/processes/test_ownership.py holds it to that)
            if not any(part.endswith(WATCHDOG) for part in proc.cmdline()):
                strays.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return strays


def collect(module: str, grace_s: float = GRACE_S) -> list[Leftover]:
    """Kill and return this session's processes that no longer descend from pytest and are
    still running `grace_s` after the module (a browser whose driver just closed is still
    going away)."""
    mark = os.environ.get(SESSION_ENV)
    if mark is None or not _strays(mark):
        return []
    time.sleep(grace_s)
    found = []
    for proc in _strays(mark):
        try:
            env = proc.environ()
            command = " ".join(proc.cmdline())[:160]
            if os.environ.get(KEEP_ENV) != "1":
                proc.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        test = env.get("PYTEST_CURRENT_TEST", "?")
        found.append(Leftover(proc.pid, command, test, module))
    return found
