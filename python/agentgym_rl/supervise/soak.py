"""`agentgym-rl soak`: many episodes through one rollout server and its env servers, watching
that nothing grows.

Contract: `soak_env(env, options)` starts the env's servers (`agentgym-rl env serve`; two for
the web envs, whose one Playwright thread per server bounds a server's episode rate) and one
`serve-rollouts` process (real vLLM; a small init-model policy of the env's own unless a model
is given) on it, takes the groups they stream in a `GroupReceiver` of its own (signed, as under
`train`; the groups are counted and dropped: no learner, no weight updates, an unbounded
staleness budget), and at the start and every `every` finished episodes samples each process:
resident memory and open file descriptors of its process tree (read from /proc; vLLM's engine
core, JVMs and browsers included), and its live episodes and asyncio tasks (the rollout
server's `metrics.jsonl`, each env server's `/health`). Between samples it reads the same figures
about twice a second and keeps their highest (`peak_*`). After `episodes` it stops them all and
returns the samples. `flat(samples, capacity)` names what grew after warm-up.

Why the peaks: a web env server's tree holds a Chromium renderer per live page (100-300 MB each)
and, while a browser is replaced, two browsers. Its memory at one instant says how many pages
were open then (miniwob's swung 1.1-2.3 GB between samples with no trend), so comparing two
instants judges the load, not a leak. The highest figure of each 1,000 episodes has seen the
full load every time; a leak raises it as it raises everything else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentgym_rl import _core
from agentgym_rl.auth import ENV_VAR, new_secret
from agentgym_rl.supervise.plan import ChildSpec
from agentgym_rl.supervise.ports import PortBook
from agentgym_rl.supervise.process import Child, die_with_parent, health_ok

GROWTH = 0.10
"""Largest growth allowed after the first sample (10%)."""
ROLLOUT = "rollout server"


@dataclass(frozen=True)
class SoakEnv:
    """How one env is driven in a soak (the settings of its `configs/train/*` runs)."""

    action_format: str
    split: str
    server_args: tuple[str, ...] = ()
    servers: int = 1


ENVS: dict[str, SoakEnv] = {
    "babyai": SoakEnv("react", "envs/agentgym_envs/babyai/data/train.json"),
    "textcraft": SoakEnv("react", "envs/agentgym_envs/textcraft/data/train.json"),
    "searchqa": SoakEnv(
        "tags", "envs/agentgym_envs/searchqa/data/train.json", ("--env-option", "retriever=bm25")
    ),
    "sciworld": SoakEnv("react", "envs/agentgym_envs/sciworld/data/train.json"),
    "webarena": SoakEnv(
        "webarena",
        "envs/agentgym_envs/web/data/webarena_train.json",
        ("--env-option", "max_obs_chars=2000"),
        servers=2,
    ),
    "miniwob": SoakEnv("webarena", "envs/agentgym_envs/web/data/miniwob_train.json", servers=2),
}


@dataclass
class SoakOptions:
    """One soak's settings; `capacity` episodes run at once at most. Without `model`, each env
    gets a small policy of its own (`make_policy`); without `env_servers`, its `SoakEnv.servers`."""

    model: Path | None
    out: Path
    episodes: int = 10_000
    every: int = 1_000
    group_size: int = 4
    max_in_flight: int = 8
    turn_cap: int = 3
    max_tokens_per_turn: int = 24
    timeout_s: float = 4 * 3600.0
    env_servers: int | None = None

    @property
    def capacity(self) -> int:
        return self.group_size * self.max_in_flight


@dataclass
class Sample:
    """One process at one point of the soak; `peak_*`: the highest figure read since the
    previous sample, this one included (None in results from before peaks were read)."""

    episodes: int
    process: str
    rss_mb: float
    open_fds: int
    live_episodes: int
    asyncio_tasks: int
    peak_rss_mb: float | None = None
    peak_open_fds: int | None = None
    peak_live_episodes: int | None = None

    @property
    def high_rss_mb(self) -> float:
        return self.rss_mb if self.peak_rss_mb is None else self.peak_rss_mb

    @property
    def high_open_fds(self) -> int:
        return self.open_fds if self.peak_open_fds is None else self.peak_open_fds

    @property
    def high_live_episodes(self) -> int:
        return self.live_episodes if self.peak_live_episodes is None else self.peak_live_episodes


@dataclass
class SoakResult:
    env: str
    episodes: int
    seconds: float
    groups_received: int
    env_steps: int = 0
    samples: list[Sample] = field(default_factory=list)


def tree_figures(pid: int) -> tuple[float, int]:
    """Resident MB and open descriptors of `pid` and all its descendants."""
    rss_kb, fds = 0, 0
    for p in [pid, *_descendants(pid)]:
        try:
            status = Path(f"/proc/{p}/status").read_text()
            rss_kb += next(
                int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS")
            )
            fds += len(os.listdir(f"/proc/{p}/fd"))
        except (OSError, StopIteration):
            continue  # exited between the listing and the read
    return rss_kb / 1024, fds


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                kids = [int(k) for k in task.read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def flat(samples: list[Sample], capacity: int) -> list[str]:
    """What did not stay flat, in words (empty: everything did). Per process, from its first
    sample after warm-up (the second; the first is taken at the start) to its last: resident
    memory and open descriptors (their peaks since the sample before, where read) grew by at
    most `GROWTH` (descriptors: plus a few), asyncio tasks beside the live episodes by at most
    `GROWTH` plus two; live episodes never exceeded `capacity` (episodes in flight at most: each
    one that ended was closed)."""
    grew = []
    for process in dict.fromkeys(s.process for s in samples):
        mine = [s for s in samples if s.process == process][1:]
        if len(mine) < 2:
            continue
        first, last = mine[0], mine[-1]
        tasks = [s.asyncio_tasks - (s.live_episodes if process == ROLLOUT else 0) for s in mine]
        figures = [
            ("RSS MB", first.high_rss_mb, last.high_rss_mb, 0.0),
            ("open fds", first.high_open_fds, last.high_open_fds, 4),
            ("asyncio tasks besides episodes", tasks[0], tasks[-1], 2),
        ]
        for what, a, b, slack in figures:
            if b > a * (1 + GROWTH) + slack:
                span = f"{a:g} at {first.episodes} -> {b:g} at {last.episodes}"
                grew.append(f"{process} {what}: {span}")
        most = max(s.high_live_episodes for s in mine)
        if most > capacity:
            grew.append(f"{process} live episodes: {most} > {capacity} in flight at most")
    return grew


class _Drain:
    """Takes every group the rollout server sends (a learner that keeps nothing)."""

    def __init__(self, secret: bytes) -> None:
        self.receiver = _core.GroupReceiver(window=64, secret=secret)
        self.groups = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.receiver.recv(0.2) is not None:
                self.groups += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.receiver.close()


def _rollout_argv(
    env: str, spec: SoakEnv, opts: SoakOptions, model: Path, addresses: list[str], learner: str
) -> list[str]:
    listed = ", ".join(f"'{a}'" for a in addresses)
    overrides = [
        f"model={model}",
        f"envs=[{{env: {env}, addresses: [{listed}], action_format: {spec.action_format}}}]",
        f"dataset.env={env}",
        f"dataset.split={spec.split}",  # found in the installed agentgym_envs outside a checkout
        f"dataset.group_size={opts.group_size}",
        f"learner.endpoints=['{learner}']",
        f"scaling_inter.stages=[{opts.turn_cap}]",
        "buffer.groups_per_step=1",
        "buffer.max_staleness=1000000000",  # no learner moves the version: never stale
        f"buffer.max_in_flight={opts.max_in_flight}",
        "buffer.max_ready=64",
        "engine.max_model_len=2048",
        "engine.dtype=float32",
        f"engine.max_tokens_per_turn={opts.max_tokens_per_turn}",
        "engine.gpu_memory_utilization=0.3",
        "weights_endpoint=null",
        "eval=null",
        "episode_log_every=0",
        "check_drift=false",
        "status_interval_s=1.0",
        f"log_dir={opts.out / env / 'rollout'}",
    ]
    return [
        *_cli("serve-rollouts"),
        *overrides,
    ]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentgym_rl.cli", *args]


def _last_record(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 65536))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return dict(json.loads(line))
        except ValueError:
            continue  # a line still being written
    return None


def _health(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
        return dict(json.loads(r.read()))


def soak_env(
    env: str, opts: SoakOptions, progress: Callable[[int, int], None] | None = None
) -> SoakResult:
    """Run one env's soak (see the module docstring); raises RuntimeError if a process dies."""
    spec = ENVS[env]
    model = opts.model or make_policy(env, opts.out)
    secret = new_secret()
    logs = opts.out / env / "logs"
    base = {**os.environ, "PYTHONUNBUFFERED": "1", ENV_VAR: secret}
    servers = _start_env_servers(env, spec, opts.env_servers or spec.servers, logs, base)
    drain = _Drain(secret.encode())
    rollout: Child | None = None
    try:
        for server in servers:
            server.wait_healthy()
        addresses = [s.address for s in servers]
        argv = _rollout_argv(env, spec, opts, model, addresses, drain.receiver.endpoint)
        rollout = Child(ChildSpec("rollout", "rollout", argv, " ".join(argv)), logs, base).start()
        metrics = opts.out / env / "rollout" / "metrics.jsonl"
        result = SoakResult(env, 0, 0.0, 0)
        peaks: dict[str, _Reading] = {}
        t0, mark = time.monotonic(), 0  # a sample at the start, then every `every` episodes
        while mark <= opts.episodes:
            for child in (*(s.child for s in servers), rollout):
                if not child.running():
                    tail = "\n".join(child.tail(20))
                    raise RuntimeError(f"{child.name} exited with {child.poll()}:\n{tail}")
            record = _last_record(metrics)
            done = -1 if record is None else int(record.get("episodes", 0))
            if progress is not None:
                progress(done, opts.episodes)
            if time.monotonic() - t0 > opts.timeout_s:
                raise RuntimeError(f"{env}: {done} episodes in {opts.timeout_s:.0f} s, stopping")
            if record is None:
                time.sleep(0.5)
                continue
            try:
                readings = _read(record, rollout, servers)
            except OSError:  # a /health that did not answer in time: only a sample needs it
                if done >= mark:
                    raise
                time.sleep(0.5)
                continue
            for process, reading in readings.items():
                peaks[process] = reading.highest(peaks.get(process))
            if done < mark:
                time.sleep(0.5)
                continue
            result.samples += [r.sample(done, p, peaks.pop(p)) for p, r in readings.items()]
            mark = (done // opts.every + 1) * opts.every  # one sample even after a long jump
        result.episodes = done
        result.env_steps = int(record.get("env_steps", 0)) if record else 0
        result.seconds = time.monotonic() - t0
        result.groups_received = drain.groups
        return result
    finally:
        if rollout is not None:
            rollout.stop(30.0)
        for server in servers:
            server.child.stop(10.0)
        drain.close()


@dataclass
class _EnvServer:
    """One env server of the soak: its child, HTTP port (health) and ZeroMQ address."""

    child: Child
    http: int
    address: str
    process: str  # the name its samples carry

    def wait_healthy(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not health_ok(self.http):
            if not self.child.running():
                raise RuntimeError(f"{self.child.name} exited:\n" + "\n".join(self.child.tail(20)))
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.child.name}: /health did not answer in {timeout_s:.0f} s"
                )
            time.sleep(0.2)


def _start_env_servers(
    env: str, spec: SoakEnv, count: int, logs: Path, base: dict[str, str]
) -> list[_EnvServer]:
    ports, out = PortBook(), []
    for i in range(count):
        http, zmq = ports.free(), ports.free()
        argv = _cli("env", "serve", env, "--port", str(http), "--zmq-port", str(zmq))
        argv += spec.server_args
        name, process = (
            (f"{env}-server", "env server")
            if count == 1
            else (
                f"{env}-server-{i}",
                f"env server {i}",
            )
        )
        child = Child(ChildSpec(name, "env", argv, " ".join(argv)), logs, base).start()
        out.append(_EnvServer(child, http, f"tcp://127.0.0.1:{zmq}", process))
    return out


@dataclass(frozen=True)
class _Reading:
    """One process's figures at one instant."""

    rss_mb: float
    open_fds: int
    live_episodes: int
    asyncio_tasks: int

    def highest(self, other: _Reading | None) -> _Reading:
        if other is None:
            return self
        return _Reading(
            max(self.rss_mb, other.rss_mb),
            max(self.open_fds, other.open_fds),
            max(self.live_episodes, other.live_episodes),
            max(self.asyncio_tasks, other.asyncio_tasks),
        )

    def sample(self, episodes: int, process: str, peak: _Reading) -> Sample:
        return Sample(
            episodes,
            process,
            round(self.rss_mb, 1),
            self.open_fds,
            self.live_episodes,
            self.asyncio_tasks,
            round(peak.rss_mb, 1),
            peak.open_fds,
            peak.live_episodes,
        )


def _read(record: dict[str, Any], rollout: Child, servers: list[_EnvServer]) -> dict[str, _Reading]:
    """Every process's figures now: the rollout server's from its last metrics record."""
    assert rollout.pid is not None
    rss, fds = tree_figures(rollout.pid)
    live, tasks = int(record.get("live_episodes", 0)), int(record.get("asyncio_tasks", 0))
    out = {ROLLOUT: _Reading(rss, fds, live, tasks)}
    for server in servers:
        assert server.child.pid is not None
        health = _health(server.http)
        rss, fds = tree_figures(server.child.pid)
        live, tasks = int(health.get("live_episodes", 0)), int(health.get("asyncio_tasks") or 0)
        out[server.process] = _Reading(rss, fds, live, tasks)
    return out


def write_result(result: SoakResult, out: Path) -> Path:
    path = out / result.env / "soak.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(result), indent=1))
    return path


def table(results: list[SoakResult]) -> str:
    """A markdown table: every sample of every process (peaks since the sample before in
    brackets)."""
    lines = [
        "| env | process | episodes | RSS MB (peak) | open fds (peak) | live episodes (peak) "
        "| asyncio tasks |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for s in r.samples:
            lines.append(
                f"| {r.env} | {s.process} | {s.episodes:,} | {s.rss_mb:.0f} ({s.high_rss_mb:.0f}) "
                f"| {s.open_fds} ({s.high_open_fds}) "
                f"| {s.live_episodes} ({s.high_live_episodes}) | {s.asyncio_tasks} |"
            )
    return "\n".join(lines)


POLICY_FLAGS = (
    "--transcripts",
    "48",
    "--max-turns",
    "3",
    "--vocab-size",
    "800",
    "--hidden",
    "64",
    "--layers",
    "2",
    "--heads",
    "2",
    "--kv-heads",
    "2",
    "--intermediate",
    "128",
    "--warmup-steps",
    "100",
    "--warmup-batch",
    "4",
    "--warmup-lr",
    "5e-3",
    "--threads",
    "2",
)
"""A policy as small as the `configs/train/*_tiny.yaml` runs make: it answers in the env's
action format often enough that episodes step the env (a random model never does)."""


def make_policy(env: str, out: Path) -> Path:
    """`init-model` for `env` into `out/<env>/model` (on 2 cores seconds, a web env's about
    1.5 min: its transcripts are played in the browser); returns the folder."""
    folder = out / env / "model"
    options = [a for a in ENVS[env].server_args]  # the same --env-option flags as its server
    argv = [*_cli("init-model", "--out", str(folder), "--env", env), *POLICY_FLAGS, *options]
    linux = sys.platform == "linux"  # a soak killed meanwhile takes init-model with it
    done = subprocess.run(
        argv, capture_output=True, text=True, preexec_fn=die_with_parent if linux else None
    )
    if done.returncode != 0:
        raise RuntimeError(f"init-model for {env} failed:\n{done.stderr[-2000:]}")
    return folder
