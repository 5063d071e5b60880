"""The watchdog `ownership.owning` starts: run as a script, standard library only.

    python watchdog.py PID MARK GRACE_S TMP

While process PID is inside an `owning()` block (it writes `+` on its stdin entering one and `-`
leaving it, and waits each time for the `.` answered on stdout), the watchdog notes PID's
descendants that were not there when the block began, once a second and on leaving (pid and
start time). When PID ends (a pidfd: however it ends, SIGKILL included), it stops every process that
is still one of those noted, descends from one, or carries MARK in `OWNER_ENV` of its
environment: SIGTERM, up to GRACE_S seconds for them to go, then SIGKILL, sweeping again until
none is left (a process stopping may start another); then it removes the owner's temporary
folder TMP ("" for none). Both ways are needed: a process that renames itself (vLLM's engine core
calls setproctitle) overwrites the environment `/proc` shows, and one started in the last
second, or by a process that already left the tree, is found by its mark. It imports nothing of
the package, so it starts in milliseconds and holds a few MB while it waits.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import sys
import time

OWNER_ENV = "AGENTGYM_RL_OWNERS"
"""Comma-separated marks of the commands a process descends from (ownership.py sets it)."""
NOTE_EVERY_S = 1.0
"""How often the owner's descendants are noted while it runs."""

Process = tuple[int, str]
"""A pid and its start time (clock ticks since boot): with the pid, unique."""


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _table() -> dict[int, tuple[int, str, str]]:
    """Every running process: pid -> (parent pid, start time, state)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := _stat(int(name))) is not None:
            table[int(name)] = (int(fields[1]), fields[19], fields[0])
    return table


def descendants(root: int, table: dict[int, tuple[int, str, str]]) -> set[Process]:
    """The processes below `root` in `table` (root excluded)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[Process] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.add((pid, table[pid][1]))
        todo.extend(children.get(pid, ()))
    return found


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
    table = _table()
    return [
        p
        for p, (_, _, state) in table.items()
        if p != me and state not in ("Z", "X") and carries(p, mark)
    ]


def owned(mark: str, noted: set[Process]) -> list[int]:
    """The running processes to stop: noted ones still alive (same start time), what carries
    `mark`, and everything below either."""
    me = os.getpid()
    table = _table()
    running = {p for p, (_, _, state) in table.items() if state not in ("Z", "X") and p != me}
    roots = {p for p, start in noted if p in running and table[p][1] == start}
    roots |= {p for p in running if carries(p, mark)}
    below = {p for root in roots for p, _ in descendants(root, table)}
    return sorted((roots | below) & running)


def watch(pid: int, blocks: int, answers: int) -> set[Process]:
    """Wait for `pid` to end, noting its descendants while it is inside a block (`blocks`: the
    read end of its `+`/`-` messages, each answered by `.` on `answers`); those noted."""
    noted: set[Process] = set()
    before: list[set[Process]] = []  # per open block: what was already there, outermost first
    try:
        fd: int | None = os.pidfd_open(pid)
    except OSError:  # gone already, or an old kernel: look at its state each turn instead
        fd = None
    waiting = [blocks] if fd is None else [fd, blocks]
    try:
        while True:
            ready = select.select(waiting, [], [], NOTE_EVERY_S)[0]
            if before:
                noted |= descendants(pid, _table()) - before[0]
            if fd in ready or (fd is None and _ended(pid)):
                return noted
            if blocks not in ready:
                continue
            told = os.read(blocks, 4096)
            if not told:  # the owner closed its end: it is ending
                waiting.remove(blocks)
            for message in told:
                if message == ord("+"):
                    before.append(descendants(pid, _table()))
                elif message == ord("-") and before:  # what the block started
                    noted |= descendants(pid, _table()) - before.pop()
                _answer(answers)  # the owner goes on once the snapshot is taken
    finally:
        if fd is not None:
            os.close(fd)


def _answer(answers: int) -> None:
    try:
        os.write(answers, b".")
    except OSError:  # the owner is gone
        pass


def _ended(pid: int) -> bool:
    fields = _stat(pid)
    return fields is None or fields[0] in ("Z", "X")


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def sweep(mark: str, grace_s: float, noted: set[Process]) -> int:
    """SIGTERM what `owned` finds, SIGKILL what is left after `grace_s`; returns how many
    processes were found."""
    seen: set[int] = set()
    while True:
        left = owned(mark, noted)
        if not left:
            return len(seen)
        fresh = [pid for pid in left if pid not in seen]
        seen.update(left)
        noted = noted | {(p, s) for p, s in ((p, start_time(p)) for p in left) if s is not None}
        _signal(fresh, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(p in seen for p in owned(mark, noted)):
            time.sleep(0.1)
        _signal(owned(mark, noted), signal.SIGKILL)
        time.sleep(0.1)


def start_time(pid: int) -> str | None:
    """`pid`'s start time (clock ticks since boot), None when it is gone."""
    fields = _stat(pid)
    return fields[19] if fields is not None else None


def main(argv: list[str]) -> int:
    pid, mark, grace_s, tmp = int(argv[0]), argv[1], float(argv[2]), argv[3]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for the command
    noted = watch(pid, sys.stdin.fileno(), sys.stdout.fileno())
    sweep(mark, grace_s, noted)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
