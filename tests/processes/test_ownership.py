"""A command that owns its descendants (`processes/ownership.py`): whatever ends it, SIGKILL
included, nothing it started outlives it, even a process in a session of its own that ignores
SIGTERM (as an orphaned vLLM engine core did). Real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentgym_rl.processes.orphans import alive
from agentgym_rl.processes.watchdog import carries

pytestmark = pytest.mark.process

# The command: owns what it starts in a block, there a stubborn grandchild outside its own process
# group (SIGTERM ignored, renamed as vLLM's engine core renames itself) and a plain one, then one
# more after the block; writes their pids and waits to be stopped.
COMMAND = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from agentgym_rl.processes.ownership import owning

    with owning(grace_s=1.0) as owner:
        # as vLLM's engine core: renames itself, which overwrites the environment /proc shows
        stubborn = subprocess.Popen(
            [sys.executable, "-c", "import signal, sys, time, setproctitle; "
             "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
             "setproctitle.setproctitle('renamed ' * 40); "
             "open(sys.argv[1], 'w').write('renamed'); time.sleep(1000)",
             sys.argv[1] + ".renamed"],
            start_new_session=True,
        )
        plain = subprocess.Popen(["sleep", "1000"])
        while not os.path.exists(sys.argv[1] + ".renamed"):
            time.sleep(0.01)
        import tempfile
        tempfile.mkstemp()  # in the owner's folder, which the watchdog removes
        open(sys.argv[1] + ".tmp", "w").write(os.environ["TMPDIR"] + " " + owner.mark)
    after = subprocess.Popen(["sleep", "1000"])  # started outside the block: not owned
    with owning():  # nor by a later block, which finds it running (the API called again)
        pass
    open(sys.argv[1], "w").write(f"{stubborn.pid} {plain.pid} {owner.watchdog.pid} {after.pid}")
    if sys.argv[2] == "exit":
        sys.exit(0)
    time.sleep(1000)
    """
)


def _start(tmp_path: Path, how: str) -> tuple[subprocess.Popen[bytes], list[int]]:
    pids_file = tmp_path / "pids"
    proc = subprocess.Popen([sys.executable, "-c", COMMAND, str(pids_file), how])
    deadline = time.monotonic() + 60
    while not (pids_file.is_file() and pids_file.read_text().count(" ") == 3):
        assert time.monotonic() < deadline, "the command did not start its children"
        time.sleep(0.05)
    return proc, [int(p) for p in pids_file.read_text().split()]


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "exit"])
def test_nothing_the_command_started_outlives_it(tmp_path: Path, how: str) -> None:
    proc, (stubborn, plain, watchdog, after) = _start(tmp_path, how)
    tmp_name, mark = (tmp_path / "pids.tmp").read_text().split()
    assert not carries(stubborn, mark)  # its environment is unreadable: the tree finds it
    try:
        if how != "exit":
            os.kill(proc.pid, getattr(signal, how))
        proc.wait(timeout=30)
        # the watchdog's grace (1 s) for SIGTERM, then SIGKILL for the stubborn one
        left = _gone_within([stubborn, plain, watchdog], 15)
        assert not left, f"left behind after {how}: {left}"
        assert alive(after), "a process started after the block was stopped"
        tmp = Path(tmp_name)
        assert tmp.name.startswith("agrl-") and not tmp.exists()
    finally:
        for pid in (stubborn, plain, after):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_process_started_before_ownership_is_not_touched(tmp_path: Path) -> None:
    """Only what carries the mark is stopped: a sibling the test started lives on."""
    sibling = subprocess.Popen(["sleep", "1000"])
    try:
        proc, pids = _start(tmp_path, "SIGKILL")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert not _gone_within(pids[:3], 15)
        os.kill(pids[3], signal.SIGKILL)
        assert sibling.poll() is None
    finally:
        sibling.kill()
        sibling.wait()


def test_torchs_compile_cache_outlives_the_owners_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a block, temporary files go to the owner's folder but torch's compile cache stays
    in the machine's, and no precompiled C++ header is made (torch would put it in the owner's
    folder, to be compiled again by every command); leaving the block restores all three."""
    from agentgym_rl.processes.ownership import owning

    for key in ("TORCHINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS"):
        monkeypatch.delenv(key, raising=False)
    before = os.environ.get("TMPDIR")
    with owning() as owner:
        assert owner is not None and owner.tmp is not None
        assert os.environ["TMPDIR"] == str(owner.tmp)
        cache = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
        assert owner.tmp not in cache.parents and cache.name.startswith("torchinductor_")
        assert os.environ["TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS"] == "0"
    assert os.environ.get("TMPDIR") == before
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    assert "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS" not in os.environ
