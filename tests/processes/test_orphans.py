"""A supervised child whose supervisor is SIGKILLed ends within seconds, with its own children:
real processes (a stand-in supervisor that starts a `Child`, the child running the rollout
service's real signal handling around a loop that would drain for a minute)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentgym_rl.processes.orphans import alive

pytestmark = pytest.mark.process

# The child: the rollout service's stop handling around a runner whose drain takes a minute,
# and a grandchild in its process group (as vLLM's engine core is).
CHILD = textwrap.dedent(
    """
    import asyncio, subprocess, sys
    from agentgym_rl.rollout.service import stopped_by_signals

    class Draining:
        def __init__(self):
            self.stopping = False
        def stop(self):
            self.stopping = True

    async def main():
        grandchild = subprocess.Popen(["sleep", "1000"])
        runner = Draining()
        with stopped_by_signals(runner, None):
            # written once the handlers are in: the test signals as soon as it reads this
            open(sys.argv[1], "w").write(str(grandchild.pid))
            for _ in range(600):
                await asyncio.sleep(0.1)  # running, then draining: a minute either way
        open(sys.argv[2], "w").write("drained")

    asyncio.run(main())
    """
)

# The supervisor stand-in: starts the child as `train` does, writes its pid, waits.
SUPERVISOR = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from agentgym_rl.processes.child import Child, ChildSpec
    argv = [sys.executable, "-c", sys.argv[1], sys.argv[3], sys.argv[4]]
    child = Child(ChildSpec("rollout-0", "rollout", argv, "child"), Path(sys.argv[2])).start()
    Path(sys.argv[5]).write_text(str(child.pid))
    time.sleep(600)
    """
)


def _gone(pid: int) -> bool:
    return not alive(pid)


def _wait_for(path: Path, timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return int(path.read_text())


@pytest.mark.parametrize("parent_dies", [True, False])
def test_a_child_ends_with_its_group_once_its_supervisor_is_killed(
    tmp_path: Path, parent_dies: bool
) -> None:
    paths = [tmp_path / n for n in ("grandchild.pid", "drained", "child.pid")]
    argv = [sys.executable, "-c", SUPERVISOR, CHILD, str(tmp_path / "logs"), *map(str, paths)]
    supervisor = subprocess.Popen(argv, start_new_session=True)
    try:
        child, grandchild = _wait_for(paths[2]), _wait_for(paths[0])
        if parent_dies:
            supervisor.kill()  # SIGKILL: the kernel sends the child SIGTERM
            supervisor.wait()
        else:
            os.kill(child, signal.SIGTERM)  # a normal stop: the child drains
        # an orphan may take a loaded machine a while to end, yet far less than the minute a
        # drain takes; a draining child is seen alive well after its SIGTERM
        deadline = time.monotonic() + (20.0 if parent_dies else 3.0)
        while not (_gone(child) and _gone(grandchild)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if parent_dies:
            assert _gone(child) and _gone(grandchild), "the orphaned child outlived 20 s"
            assert not paths[1].exists()  # it did not drain
        else:
            assert not _gone(child)  # with its supervisor alive it drains as before
    finally:
        supervisor.kill()
        supervisor.wait()
        child_pid = _pid(paths[2])
        if child_pid is not None:  # the child leads its group: the grandchild goes with it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child_pid, signal.SIGKILL)


def _pid(path: Path) -> int | None:
    return int(path.read_text()) if path.exists() and path.read_text() else None
