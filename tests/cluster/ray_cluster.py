"""A local Ray cluster for tests: one head node on loopback, started and stopped by the test.

`start_ray_cluster(temp_dir)` runs `ray start --head --block` (2 CPUs, 2 declared GPUs although
the machine may have none, the custom resource `env_host: 2`, the dashboard with its job and
state API) on free ports, in its own session, and returns once the job API and the state API
answer. `RayCluster.stop()` sends SIGTERM to that `ray start` (it shuts its node down), then
SIGKILLs, by pid, whatever is left of the processes it started (its session's group, anything
naming the temp dir, and every process that descended from it: workers, actors, their
children), and returns the ones it had to kill. `ray stop` is never used: it stops every Ray
process of the machine, another test run's cluster included.

No network beyond loopback: usage stats off, `uv run` detection off (it would rebuild the
driver's environment for the workers), no runtime env (nothing is uploaded; workers run the
interpreter and packages of this virtualenv).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from agentgym_rl.processes.ports import free_ports

HEAD_RESOURCES = {"env_host": 2}
NUM_CPUS = 2
NUM_GPUS = 2
START_TIMEOUT_S = 90.0


def ray_missing() -> str | None:
    """Why Ray cannot run here (None when it can)."""
    try:
        import ray
        import ray.dashboard.optional_deps  # noqa: F401  # the dashboard: jobs, state API
    except ImportError as e:
        return f"Ray with its dashboard is not installed ({e}): pip install 'ray[default]'"
    if _ray_cli() is None:
        return "the `ray` command is not installed next to this Python"
    return None


def _ray_cli() -> str | None:
    here = Path(sys.executable).parent / "ray"
    return str(here) if here.is_file() else shutil.which("ray")


def ray_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of `ray start` and of the processes a test runs against the cluster."""
    env = dict(os.environ if base is None else base)
    env.update(
        RAY_USAGE_STATS_ENABLED="0",
        RAY_ENABLE_UV_RUN_RUNTIME_ENV="0",
        PYTHONUNBUFFERED="1",
    )
    for name in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"):
        env.pop(name, None)  # a cluster of the user's own must not be reached
    return env


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, process group) of `pid`, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[2])


def cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def pids_matching(text: str) -> list[int]:
    """Live processes (zombies aside) whose command line contains `text`."""
    return [p for p in _pids() if p != os.getpid() and text in cmdline(p)]


def descendants(root: int) -> set[int]:
    """Every live process below `root`."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        st = _stat(pid)
        if st is not None:
            children.setdefault(st[0], []).append(pid)
    found: set[int] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _get_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@dataclass
class RayCluster:
    """A running head node (see the module docstring)."""

    address: str
    """GCS address: `ray.init(address=...)`, `ray start --address` of another node."""
    dashboard_url: str
    """Job and state API: `ray job submit --address`, `list_actors(address=...)`."""
    env: dict[str, str]
    """Environment for processes that talk to the cluster (RAY_ADDRESS and
    RAY_API_SERVER_ADDRESS set)."""
    temp_dir: Path
    proc: subprocess.Popen[bytes]
    log_path: Path
    started_in_s: float = 0.0
    seen: dict[int, str] = field(default_factory=dict)
    """Every process of the cluster seen so far (pid -> command line)."""

    def remember(self) -> None:
        """Note the cluster's processes now (the ones to check at the end)."""
        for pid in self.members():
            self.seen.setdefault(pid, cmdline(pid))

    def members(self) -> set[int]:
        """Live processes that belong to this cluster."""
        mine = descendants(self.proc.pid)
        group = {p for p in _pids() if (_stat(p) or (0, 0))[1] == self.proc.pid}
        named = set(pids_matching(str(self.temp_dir)))
        return {p for p in mine | group | named if alive(p)}

    def _left(self) -> list[int]:
        """Processes seen before (same command line) or belonging now that still live."""
        same = {p for p, cmd in self.seen.items() if alive(p) and cmdline(p) == cmd}
        return sorted(same | self.members())

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self, grace_s: float = 30.0) -> list[str]:
        """Shut the node down; the processes that outlived the grace period (then killed)."""
        self.remember()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace_s)
        deadline = time.monotonic() + 10.0
        while self._left() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = self._left()
        report = [f"{p}: {cmdline(p)[:160]}" for p in left]
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        return report


def start_ray_cluster(temp_dir: Path, *, log_path: Path | None = None) -> RayCluster:
    """Start a head node under `temp_dir` (keep it short: Ray's socket paths live there)."""
    cli = _ray_cli()
    assert cli is not None
    gcs, dashboard, client, agent = free_ports(4, low=20000)  # above Ray's worker ports
    env = ray_env()
    argv = [
        cli,
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--port={gcs}",
        f"--num-cpus={NUM_CPUS}",
        f"--num-gpus={NUM_GPUS}",
        f"--resources={json.dumps(HEAD_RESOURCES)}",
        f"--temp-dir={temp_dir}",
        "--include-dashboard=true",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dashboard}",
        f"--ray-client-server-port={client}",
        f"--dashboard-agent-listen-port={agent}",
        f"--object-store-memory={128 * 1024 * 1024}",
        "--disable-usage-stats",
        "--log-style=record",
        "--log-color=false",
    ]
    log_path = log_path or temp_dir.parent / f"{temp_dir.name}-start.log"
    began = time.monotonic()
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    address, url = f"127.0.0.1:{gcs}", f"http://127.0.0.1:{dashboard}"
    cluster = RayCluster(
        address=address,
        dashboard_url=url,
        env={**env, "RAY_ADDRESS": address, "RAY_API_SERVER_ADDRESS": url},
        temp_dir=temp_dir,
        proc=proc,
        log_path=log_path,
    )
    deadline = began + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            cluster.stop()
            raise RuntimeError(f"ray start exited with {proc.returncode}:\n{cluster.log_tail()}")
        started = b"Ray runtime started" in log_path.read_bytes()
        listening = all(_listening(p) for p in (gcs, dashboard, client, agent))
        if started and listening and _get_ok(f"{url}/api/jobs/") and _get_ok(f"{url}/api/v0/nodes"):
            break
        if time.monotonic() > deadline:
            cluster.stop()
            raise RuntimeError(
                f"the Ray head did not answer within {START_TIMEOUT_S:.0f}s:\n{cluster.log_tail()}"
            )
        time.sleep(0.5)
    cluster.started_in_s = time.monotonic() - began
    cluster.remember()
    return cluster
