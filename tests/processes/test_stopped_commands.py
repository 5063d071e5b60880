"""A stopped command leaves nothing behind: each command that starts processes, stopped by
SIGINT, SIGTERM or SIGKILL in each phase (its children starting, its work, its results), ends
with no process of its tree left, and keeps what it had finished. Real processes throughout.

CI runs the slice `tests/tiers.py` leaves unmarked; the whole matrix is
`pytest -m extended tests/processes/test_stopped_commands.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from agentgym_rl.episode.log import EPISODES_FILE

pytestmark = pytest.mark.engine  # each case starts vLLM (in the eval it stops)

ROOT = Path(__file__).resolve().parents[2]
SPLIT = ROOT / "envs/agentgym_envs/babyai/data/goto_test.json"
BOUND_S = {"SIGINT": 30.0, "SIGTERM": 30.0, "SIGKILL": 30.0}
"""From the signal to the last process of the tree gone: the command's own unwinding bound
(20 s) or the watchdog's grace (5 s) plus start-up slack."""


@pytest.fixture(scope="module")
def babbler(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny model: every turn runs to its token cap (the case of the issue)."""
    from agentgym_rl.policy_creation import create_tiny_model
    from vllm_fixtures import tiny_corpus

    out = tmp_path_factory.mktemp("babbler")
    create_tiny_model(out, corpus=tiny_corpus(), vocab_size=320, seed=0)
    return out


@dataclass
class Watched:
    """A command under test: its process, every descendant seen, its temporary folder."""

    proc: subprocess.Popen[str]
    tmp: Path
    seen: dict[int, float]  # pid -> create time

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

    def kill_leftovers(self) -> None:
        for pid in self.seen:
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                continue


def _start(argv: list[str], tmp_path: Path) -> Watched:
    # short: vLLM's sockets are TMPDIR/<owner's folder>/<uuid4>, at most 107 bytes
    tmp = Path(tempfile.mkdtemp(prefix="stop-", dir="/tmp"))
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentgym_rl.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    return Watched(proc, tmp, {})


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


def _engine_core_started(w: Watched) -> bool:
    names = []
    for pid in w.seen:
        try:
            names.append(" ".join(psutil.Process(pid).cmdline()))
        except psutil.NoSuchProcess:
            continue
    return any("EngineCore" in n or "multiprocessing.spawn" in n for n in names)


# eval: the tasks of each phase. `working` has far more episodes than it reaches; `results`
# logs all of its episodes, then plays the yardsticks and writes its report.
EVAL_TASKS = {"starting": (200, 4), "working": (200, 4), "results": (24, 1)}


def _eval_argv(model: Path, out: Path, phase: str) -> list[str]:
    limit, n = EVAL_TASKS[phase]
    argv = ["eval", "--model", str(model), "--split", str(SPLIT), "--out", str(out)]
    argv += ["--limit", str(limit), "--n", str(n), "--turn-cap", "5", "--no-progress"]
    argv += ["--max-tokens-per-turn", "48", "--dtype", "float32", "--max-model-len", "1024"]
    return argv + (["--yardsticks"] if phase == "results" else [])


def _in_ci(phase: str, sig: str) -> bool:
    """CI's slice (each case starts an engine, ~25-40 s): SIGTERM in every phase, and SIGKILL
    while it works (the watchdog alone cleans up)."""
    return sig == "SIGTERM" or (phase, sig) == ("working", "SIGKILL")


@pytest.mark.parametrize(
    ("phase", "sig"),
    [
        pytest.param(p, s, marks=[] if _in_ci(p, s) else [pytest.mark.extended])
        for p in EVAL_TASKS
        for s in ("SIGINT", "SIGTERM", "SIGKILL")
    ],
)
def test_eval_stopped_leaves_nothing_and_keeps_its_episodes(
    babbler: Path, tmp_path: Path, phase: str, sig: str
) -> None:
    out = tmp_path / "out"
    w = _start(_eval_argv(babbler, out, phase), tmp_path)
    episodes = out / EPISODES_FILE
    try:
        if phase == "starting":
            w.wait_for("vLLM's engine core", lambda: _engine_core_started(w))
        elif phase == "working":
            w.wait_for("a first episode", lambda: _lines(episodes) >= 1)
        else:
            w.wait_for("every episode", lambda: _lines(episodes) >= EVAL_TASKS[phase][0])
        logged = _lines(episodes)
        os.kill(w.proc.pid, getattr(signal, sig))
        w.proc.wait(timeout=BOUND_S[sig])
        deadline = time.monotonic() + BOUND_S[sig]
        while w.left() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not w.left(), f"left behind {BOUND_S[sig]} s after {sig}: {w.left()}"
        assert _lines(episodes) >= logged  # what it finished is kept
        if sig != "SIGKILL":
            said = w.output()
            assert w.proc.returncode == 128 + getattr(signal, sig), said
            assert f"eval: stopped by {sig}" in said, said
        deadline = time.monotonic() + 10  # the watchdog removes the folder after its sweep
        while any(w.tmp.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.2)
        leftovers = [p.name for p in w.tmp.iterdir()]
        assert not leftovers, f"temporary files left: {leftovers}"
        if phase == "results" and (out / "eval.json").is_file():  # finished before the signal
            assert json.loads((out / "eval.json").read_text())["meta"]["tasks"] == 24
    finally:
        if w.proc.poll() is None:
            w.proc.kill()
        w.kill_leftovers()
        shutil.rmtree(w.tmp, ignore_errors=True)
