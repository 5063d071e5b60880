"""`wait_ready` against a child whose readiness is its own clean exit (model creation)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentgym_rl.processes.child import Child, ChildExited, ChildSpec, wait_ready

pytestmark = pytest.mark.process


def _child(tmp_path: Path, code: int) -> Child:
    argv = [sys.executable, "-c", f"import sys; sys.exit({code})"]
    return Child(ChildSpec("job", "init", argv, " ".join(argv)), tmp_path)


def test_a_job_that_exits_cleanly_between_two_polls_is_ready(tmp_path: Path) -> None:
    job = _child(tmp_path, 0).start()
    checks: list[bool] = []

    def ready() -> bool:
        # the first check sees the job running; it exits before the exit code is read
        if not checks:
            job.proc.wait()  # type: ignore[union-attr]
            checks.append(False)
            return False
        checks.append(job.poll() == 0)
        return checks[-1]

    wait_ready(job, ready, timeout_s=10)
    assert checks == [False, True]


def test_a_job_that_fails_is_still_a_crash(tmp_path: Path) -> None:
    job = _child(tmp_path, 3).start()
    with pytest.raises(ChildExited) as e:
        wait_ready(job, lambda: job.poll() == 0, timeout_s=10)
    assert e.value.code == 3


def test_a_port_that_answers_but_not_in_http_is_not_ready() -> None:
    """A ZeroMQ socket's greeting where an HTTP server was awaited (a SLURM job's port taken
    once): not ready, where it once crashed the supervisor with `BadStatusLine`."""
    import socket
    import threading

    from agentgym_rl.processes.child import health_ok

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)

        def greet() -> None:
            conn, _ = server.accept()
            with conn:
                conn.sendall(b"\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f\x03\x00NULL" + b"\0" * 16)
                conn.recv(1024)

        threading.Thread(target=greet, daemon=True).start()
        assert health_ok(server.getsockname()[1]) is False
