"""Stopping a command and reading what it left behind: the stopped-command matrix's harness
(tests/processes/test_stopped_*.py). A `Watched` command records every descendant it is seen
with (pid and start time: a pid reused later is not it), so after the signal the test knows
which of them still run, whatever renamed itself or left the process group."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

SIGNALS = ("SIGINT", "SIGTERM", "SIGKILL")

BOUND_S = 30.0
"""From the signal to the last process of the tree gone: a command's own unwinding (at most
20 s) or the watchdog's sweep (SIGTERM, 5 s, SIGKILL) plus start-up slack."""


@dataclass
class Watched:
    """A command under test: its process, every descendant seen, its temporary folder."""

    proc: subprocess.Popen[str]
    tmp: Path
    seen: dict[int, float] = field(default_factory=dict)  # pid -> create time

    def look(self) -> None:
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for kid in kids:
            try:
                self.seen.setdefault(kid.pid, kid.create_time())
            except psutil.NoSuchProcess:
                continue

    def wait_for(self, what: str, ready: Callable[[], bool], timeout_s: float = 240) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            self.look()
            assert self.proc.poll() is None, f"ended before {what}:\n{self.output()}"
            assert time.monotonic() < deadline, f"no {what} in {timeout_s} s:\n{self.output()}"
            time.sleep(0.05)
        self.look()

    def cmdlines(self) -> list[str]:
        """The command lines of the descendants seen that still run."""
        lines = []
        for pid in self.seen:
            try:
                lines.append(" ".join(psutil.Process(pid).cmdline()))
            except psutil.NoSuchProcess:
                continue
        return lines

    def left(self) -> list[str]:
        """The descendants seen that still run (the same process: same create time)."""
        alive = []
        for pid, created in self.seen.items():
            try:
                p = psutil.Process(pid)
                if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{pid} {' '.join(p.cmdline())[:120]}")
            except psutil.NoSuchProcess:
                continue
        return alive

    def output(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        out, _ = self.proc.communicate()
        return out[-3000:]

    def stop(self, sig: str, bound_s: float = BOUND_S) -> None:
        """Send `sig`; the command ends, then every descendant seen, each within `bound_s`."""
        self.look()
        os.kill(self.proc.pid, getattr(signal, sig))
        self.proc.wait(timeout=bound_s)
        deadline = time.monotonic() + bound_s
        while self.left() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not self.left(), f"left behind {bound_s} s after {sig}: {self.left()}"

    def assert_no_temporary_files(self, wait_s: float = 10.0) -> None:
        """The command's TMPDIR holds nothing (the watchdog empties it after its sweep)."""
        deadline = time.monotonic() + wait_s
        while any(self.tmp.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.2)
        leftovers = [p.name for p in self.tmp.iterdir()]
        assert not leftovers, f"temporary files left: {leftovers}"

    def clean_up(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        for pid in self.seen:
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                continue
        shutil.rmtree(self.tmp, ignore_errors=True)


def start(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> Watched:
    """`argv` (a Python command line) with a temporary folder of its own as TMPDIR."""
    # short: vLLM's sockets are TMPDIR/<owner's folder>/<uuid4>, at most 107 bytes
    tmp = Path(tempfile.mkdtemp(prefix="stop-", dir="/tmp"))
    proc = subprocess.Popen(
        [sys.executable, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {}), "TMPDIR": str(tmp)},
        cwd=cwd,
    )
    return Watched(proc, tmp)


def start_cli(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> Watched:
    return start(["-m", "agentgym_rl.cli", *argv], cwd, env)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


def learner_steps(run: Path) -> int:
    """The last step a run's learner logged (0 before its first)."""
    metrics = run / "learn" / "metrics.jsonl"
    rows = metrics.read_text().splitlines() if metrics.is_file() else []
    try:
        return int(json.loads(rows[-1])["step"]) if rows else 0
    except (ValueError, KeyError):
        return 0  # a line still being written


def engine_core_started(w: Watched) -> bool:
    return any("EngineCore" in n or "multiprocessing.spawn" in n for n in w.cmdlines())


def port_bound(port: int) -> bool:
    """Whether something listens on `port` on loopback."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def exit_code(sig: str) -> int:
    return 128 + int(getattr(signal, sig))


def by_signal() -> list[object]:
    """Each signal as a case; CI's slice is SIGTERM, the others are `extended`."""
    return [
        pytest.param(s, marks=[] if s == "SIGTERM" else [pytest.mark.extended]) for s in SIGNALS
    ]
