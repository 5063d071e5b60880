"""Every process a command starts ends with it, however the command ends.

Contract: inside `with owning():` (the CLI wraps every command whose `CHILDREN` is not empty;
the Python API wraps `evaluate` and `train`), this process's mark (pid and start time) is in
`OWNER_ENV` of its environment, so every process started meanwhile inherits it, whoever starts
it (our children, vLLM's engine core, torchrun's workers, JVMs, browsers). The first `owning()`
of a process starts `watchdog.py` in a session of its own with the mark removed from its
environment. When this process ends, by returning, by an exception or by any signal, SIGKILL
included, the watchdog stops every process still carrying the mark, and every descendant it
noted while the process was inside a block (vLLM's engine core renames itself, which hides its
environment): SIGTERM, `grace_s` to go, SIGKILL. Marks accumulate down a tree (`train`'s
children carry its mark and their own), so any ancestor's watchdog reaches every descendant. Temporary files go to a folder of the owner's
(`TMPDIR` of the block and `tempfile.tempdir` within it: vLLM's sockets, adapters, env servers'
scratch), which the watchdog removes after its sweep. Leaving the block restores the
environment: what the process starts afterwards is not its to stop (a Python session that called
the API once keeps its later subprocesses). Linux only (elsewhere it yields None and does
nothing).

What must outlive its command (a job submitted to SLURM or Ray) is started with
`unowned_env()`, which drops the marks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agentgym_rl.processes.watchdog import OWNER_ENV, marked, start_time

GRACE_S = 5.0
"""How long the watchdog lets SIGTERMed leftovers stop before SIGKILL."""
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
INDUCTOR_HEADERS_ENV = "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS"
TMPDIR_MAX = 64
"""The longest owner's folder used as `TMPDIR`: vLLM names its sockets `TMPDIR/<uuid4>`, and a
Unix socket's path holds at most 107 bytes."""


@dataclass(frozen=True)
class Owner:
    """This process as an owner: its mark and its watchdog."""

    mark: str
    watchdog: subprocess.Popen[bytes]
    tmp: Path | None
    """The temporary folder of what it owns (removed by the watchdog); None where `TMPDIR` is
    too long to nest one in (`TMPDIR_MAX`)."""

    def leftovers(self) -> list[int]:
        """The pids of running processes that carry this mark (this one excluded)."""
        return [pid for pid in marked(self.mark) if pid != os.getpid()]


_OWNER: Owner | None = None


def _owner(grace_s: float) -> Owner | None:
    """This process's owner, its watchdog started on the first call (Linux only)."""
    global _OWNER
    if _OWNER is not None or not sys.platform.startswith("linux"):
        return _OWNER
    pid = os.getpid()
    mark = f"{pid}.{start_time(pid)}"
    made = Path(tempfile.mkdtemp(prefix="agrl-"))
    tmp = made if len(str(made)) <= TMPDIR_MAX else None
    if tmp is None:
        made.rmdir()
    script = Path(__file__).with_name("watchdog.py")
    watchdog = subprocess.Popen(
        [sys.executable, "-I", str(script), str(pid), mark, str(grace_s), str(tmp or "")],
        stdin=subprocess.PIPE,  # `+` entering a block, `-` leaving it
        stdout=subprocess.PIPE,  # `.` answers each, once the descendants are looked at
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a group kill of the command does not reach it
        env=unowned_env(),
    )
    _OWNER = Owner(mark, watchdog, tmp)
    return _OWNER


@contextmanager
def owning(grace_s: float = GRACE_S) -> Iterator[Owner | None]:
    """Mark what this process starts inside the block (module docstring)."""
    owner = _owner(grace_s)
    kept = (OWNER_ENV, "TMPDIR", INDUCTOR_CACHE_ENV, INDUCTOR_HEADERS_ENV)
    before = {key: os.environ.get(key) for key in kept}
    tempdir = tempfile.tempdir
    if owner is not None:
        marks = [m for m in (before[OWNER_ENV] or "").split(",") if m]
        if owner.mark not in marks:
            os.environ[OWNER_ENV] = ",".join([*marks, owner.mark])
        if owner.tmp is not None:
            # torch's compile cache stays where it was (under the old TMPDIR, by default), so
            # each command does not compile afresh; its precompiled C++ header would not (torch
            # puts it under TMPDIR whatever the cache folder), and compiling it costs ~7
            # CPU-seconds in every process that loads a cached kernel: none is made
            os.environ.setdefault(INDUCTOR_CACHE_ENV, _inductor_cache_dir())
            os.environ.setdefault(INDUCTOR_HEADERS_ENV, "0")
            os.environ["TMPDIR"] = tempfile.tempdir = str(owner.tmp)
    _tell(owner, b"+")
    try:
        yield owner
    finally:
        _tell(owner, b"-")
        tempfile.tempdir = tempdir
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _inductor_cache_dir() -> str:
    """torch inductor's default cache folder: `torchinductor_<user>` in the temporary folder."""
    import getpass
    import re

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(
        tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)
    )


def _tell(owner: Owner | None, message: bytes) -> None:
    """Tell the watchdog this process enters or leaves a block and wait for its answer: what
    started before the block, or starts after it, is not the block's."""
    if owner is None or owner.watchdog.stdin is None or owner.watchdog.stdout is None:
        return
    try:
        owner.watchdog.stdin.write(message)
        owner.watchdog.stdin.flush()
        owner.watchdog.stdout.read(1)  # b"" if the watchdog is gone
    except OSError:  # the watchdog is gone: nothing to tell
        pass


def unowned_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's environment) without the owners' marks: for a process
    that must outlive every command above it."""
    return {k: v for k, v in (os.environ if env is None else env).items() if k != OWNER_ENV}


__all__ = ["GRACE_S", "OWNER_ENV", "TMPDIR_MAX", "Owner", "owning", "unowned_env"]
