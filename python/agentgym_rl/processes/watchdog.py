"""The watchdog `ownership.own_descendants` starts: run as a script, standard library only.

    python watchdog.py PID MARK GRACE_S

It waits for process PID to end (a pidfd: no polling; however it ends, SIGKILL included), then
stops every process whose environment carries MARK in `OWNER_ENV`: SIGTERM, up to GRACE_S
seconds for them to go, then SIGKILL, sweeping again until none is left (a process stopping may
start another). It imports nothing of the package, so it starts in milliseconds and holds a few
MB while it waits.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

OWNER_ENV = "AGENTGYM_RL_OWNERS"
"""Comma-separated marks of the commands a process descends from (ownership.py sets it)."""


def carries(pid: int, mark: str) -> bool:
    """Whether process `pid`'s environment names `mark` among its owners."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:  # gone, or not ours to read
        return False
    key = f"{OWNER_ENV}=".encode()
    for entry in env:
        if entry.startswith(key):
            return mark in entry[len(key) :].decode(errors="replace").split(",")
    return False


def marked(mark: str) -> list[int]:
    """The pids of the running processes that carry `mark` (zombies excluded)."""
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me and carries(int(name), mark):
            if not _zombie(int(name)):
                found.append(int(name))
    return found


def wait_for_exit(pid: int) -> None:
    """Return once `pid` has ended."""
    try:
        fd = os.pidfd_open(pid)
    except (OSError, AttributeError):  # gone already, or no pidfd (old kernel): poll
        while os.path.exists(f"/proc/{pid}") and not _zombie(pid):
            time.sleep(0.5)
        return
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def _zombie(pid: int) -> bool:
    """Whether `pid` has ended (a zombie, or gone); `orphans.alive`'s test, kept here because
    this script imports nothing of the package."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def sweep(mark: str, grace_s: float) -> int:
    """SIGTERM what carries `mark`, SIGKILL what is left after `grace_s`; returns how many
    processes were found."""
    seen: set[int] = set()
    while True:
        left = marked(mark)
        if not left:
            return len(seen)
        fresh = [pid for pid in left if pid not in seen]
        seen.update(left)
        _signal(fresh, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(p in seen for p in marked(mark)):
            time.sleep(0.1)
        _signal(marked(mark), signal.SIGKILL)
        time.sleep(0.1)


def main(argv: list[str]) -> int:
    pid, mark, grace_s = int(argv[0]), argv[1], float(argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for the command
    wait_for_exit(pid)
    sweep(mark, grace_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
