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
about four times a second; each sample also carries their mean and highest since the sample before.
After `episodes`, or at Ctrl-C, it stops them all and returns the samples, with each process's
descriptors at rest: an env server's before the rollout server started and after it stopped, the
rollout server's (and its asyncio tasks) at its first mark after the start and after its last
sample, read once none of its episodes is live (the drain holds its groups: the buffer fills and
admission stops, as under a learner that stops taking groups, and resumes after; episodes that
finish during the first reading move the later marks on). Under load they follow
the live episodes; at rest what is left is a leak. `soak_figures.flat` judges them. With
`agent` (`module:function`), every episode is a run of that agent against the rollout server's OpenAI-compatible endpoint (docs/agents.md), the env
servers' HTTP addresses given to it: the endpoint soaked under `capacity` concurrent episodes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from agentgym_rl import _core
from agentgym_rl.auth import ENV_VAR, new_secret
from agentgym_rl.experiments.soak_figures import ROLLOUT, Reading, SoakResult, Stretch, tree_figures
from agentgym_rl.experiments.soak_policy import make_policy
from agentgym_rl.processes.child import Child, cli_spec
from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.processes.ports import PortBook


@dataclass(frozen=True)
class SoakEnv:
    """How one env is driven in a soak: its `train` split, the action format it declares, one
    server; `OVERRIDES` holds the envs run otherwise (the settings of their `configs/train/*`)."""

    split: str = "train"
    server_args: tuple[str, ...] = ()
    servers: int = 1


OVERRIDES: dict[str, SoakEnv] = {
    "searchqa": SoakEnv(server_args=("--env-option", "retriever=bm25")),
    "webarena": SoakEnv(server_args=("--env-option", "max_obs_chars=2000"), servers=2),
    "miniwob": SoakEnv(servers=2),
}


def soak_spec(env: str) -> SoakEnv:
    """How `env` is soaked (any env the catalog finds)."""
    return OVERRIDES.get(env, SoakEnv())


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
    agent: str | None = None
    """`module:function` of an agent run per episode through the endpoint (None: the loop)."""

    @property
    def capacity(self) -> int:
        return self.group_size * self.max_in_flight


class _Drain:
    """Takes every group the rollout server sends (a learner that keeps nothing), except while
    held: then the groups wait, a few in its credit window and the rest in the rollout server's
    buffer, whose admission stops."""

    def __init__(self, secret: bytes) -> None:
        self.receiver = _core.GroupReceiver(window=8, secret=secret)
        self.groups = 0
        self.held = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.held.is_set():
                time.sleep(0.1)
            elif self.receiver.recv(0.2) is not None:
                self.groups += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.receiver.close()


def _rollout_args(
    env: str,
    spec: SoakEnv,
    opts: SoakOptions,
    model: Path,
    servers: list[EnvServerProcess],
    learner: str,
) -> list[str]:
    listed = ", ".join(f"'{s.zmq}'" for s in servers)
    agent = []
    if opts.agent is not None:
        urls = ", ".join(f"'{s.http}'" for s in servers)
        agent = [f"agent={{function: '{opts.agent}', env_urls: {{{env}: [{urls}]}}}}"]
    overrides = [
        f"model={model}",
        f"envs=[{{env: {env}, addresses: [{listed}]}}]",  # its declared action format
        f"dataset={{env: {env}, split: {spec.split}, group_size: {opts.group_size}}}",
        f"learner.endpoints=['{learner}']",
        f"scaling_inter.turn_caps=[{opts.turn_cap}]",
        "buffer.groups_per_step=1",
        "buffer.max_staleness=1000000000",  # no learner moves the version: never stale
        f"buffer.max_in_flight={opts.max_in_flight}",
        f"buffer.max_ready={opts.max_in_flight}",  # held groups stop admission at once
        "engine.max_model_len=2048",
        "engine.dtype=float32",
        f"engine.max_tokens_per_turn={opts.max_tokens_per_turn}",
        "engine.gpu_memory_utilization=0.3",
        "weights_endpoint=null",
        "eval=null",
        "episode_log_every=0",
        "check_drift=false",
        "status_interval_s=0.5",  # counts fine enough that each mark gets a sample near it
        f"log_dir={opts.out / env / 'rollout'}",
        *agent,
    ]
    return ["serve-rollouts", *overrides]


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


def soak_env(
    env: str, opts: SoakOptions, progress: Callable[[int, int], None] | None = None
) -> SoakResult:
    """Run one env's soak (see the module docstring); raises RuntimeError if a process dies.
    Ctrl-C (KeyboardInterrupt) after the rollout server started ends it early: the processes
    are stopped and the result holds the samples so far (`stopped`)."""
    spec = soak_spec(env)
    model = opts.model or make_policy(env, opts.out, spec.server_args)
    secret = new_secret()
    logs = opts.out / env / "logs"
    base = {**os.environ, "PYTHONUNBUFFERED": "1", ENV_VAR: secret}
    servers = _start_env_servers(env, spec, opts.env_servers or spec.servers, logs, base)
    drain = _Drain(secret.encode())
    rollout: Child | None = None
    try:
        for server in servers:
            server.wait_ready()
        at_rest = {_label(i, len(servers)): [_fds(s)] for i, s in enumerate(servers)}
        args = _rollout_args(env, spec, opts, model, servers, drain.receiver.endpoint)
        rollout = Child(cli_spec("rollout", "rollout", *args), logs, base).start()
        watch = _Watch(env, opts, rollout, servers, drain, progress)
        try:
            watch.run()
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into one by the CLI
            watch.result.stopped = True
        watch.result.groups_received = drain.groups
        rollout.stop(30.0)
        for i, server in enumerate(servers):
            label = _label(i, len(servers))
            (fds,) = _fewest_at_rest(partial(_fds_of, server), (at_rest[label][0],))
            at_rest[label].append(fds)
        if len(watch.rollout_at_rest) == 2:  # both read: not stopped before the last mark
            at_rest[ROLLOUT] = [fds for fds, _ in watch.rollout_at_rest]
            watch.result.at_rest_tasks = {ROLLOUT: [tasks for _, tasks in watch.rollout_at_rest]}
        watch.result.at_rest_fds = at_rest
        return watch.result
    finally:
        if rollout is not None:
            rollout.stop(30.0)
        for server in servers:
            server.stop(10.0)
        drain.close()


class _Watch:
    """Reads every process about four times a second into its `Stretch`, and samples them at the
    start and every `opts.every` episodes up to `opts.episodes` (into `result`); at the first
    mark after the start and after the last sample it also reads the rollout server at rest
    (the episodes that finish during the first of those readings are not counted in the marks)."""

    REST_TIMEOUT_S = 120.0

    def __init__(
        self,
        env: str,
        opts: SoakOptions,
        rollout: Child,
        servers: list[EnvServerProcess],
        drain: _Drain,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        self.opts, self.rollout, self.servers, self.progress = opts, rollout, servers, progress
        self.drain = drain
        self.metrics = opts.out / env / "rollout" / "metrics.jsonl"
        self.result = SoakResult(env, 0, 0.0, 0)
        self.stretches: dict[str, Stretch] = {}
        self.rollout_at_rest: list[tuple[int, int]] = []  # (descriptors, asyncio tasks)
        self.t0 = time.monotonic()

    def run(self) -> None:
        mark = 0  # the next sample's episode count
        # episodes that finish while the first at-rest reading holds the drain do not count
        # toward `episodes` or the marks: that reading once took 90 -> 300 of a 240-episode
        # soak, which then had no sample under load after it
        paused = 0
        while mark <= self.opts.episodes + paused:
            self._check_alive()
            record = _last_record(self.metrics)
            done = -1 if record is None else int(record.get("episodes", 0))
            self._note(done, record)
            readings = self._read(record, must=done >= mark)
            if readings is None or done < mark:
                for process, reading in (readings or {}).items():
                    self.stretches.setdefault(process, Stretch()).add(reading)
                time.sleep(0.25)
                continue
            self.result.samples += [
                self.stretches.pop(p, Stretch()).sample(done, p, r) for p, r in readings.items()
            ]
            if mark > 0 and not self.rollout_at_rest:
                self.rollout_at_rest.append(self._rollout_at_rest())
                after = int((_last_record(self.metrics) or {}).get("episodes", done))
                done, paused = after, after - done
            every = self.opts.every  # the next mark, one even after a long jump
            mark = ((done - paused) // every + 1) * every + paused
        # after the last sample, not at it: episodes run on while the first reading waits for
        # rest, so the count can pass the last mark there (a run then had one reading, not two)
        self.rollout_at_rest.append(self._rollout_at_rest())

    def _rollout_at_rest(self) -> tuple[int, int]:
        """The rollout server's descriptors and asyncio tasks with no live episode: the drain
        holds the groups until its episodes have ended, then both are read (`_fewest_at_rest`;
        the tasks from its metrics records)."""
        self.drain.held.set()
        try:
            deadline = time.monotonic() + self.REST_TIMEOUT_S
            while True:
                self._check_alive()
                record = _last_record(self.metrics) or {}
                self._note(int(record.get("episodes", 0)), record)
                if record.get("live_episodes") == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the rollout server never came to rest: {record}")
                time.sleep(0.25)
            before = self.rollout_at_rest[0] if self.rollout_at_rest else (0, 0)
            pid = self.rollout.pid
            assert pid is not None
            fds, tasks = _fewest_at_rest(lambda: (tree_figures(pid)[1], self._tasks()), before)
            return fds, tasks
        finally:
            self.drain.held.clear()

    def _tasks(self) -> int:
        """The rollout server's asyncio tasks in its last metrics record."""
        return int((_last_record(self.metrics) or {}).get("asyncio_tasks") or 0)

    def _check_alive(self) -> None:
        children = [s.child for s in self.servers if s.child is not None]
        for child in (*children, self.rollout):
            if not child.running():
                tail = "\n".join(child.tail(20))
                raise RuntimeError(f"{child.name} exited with {child.poll()}:\n{tail}")

    def _note(self, done: int, record: dict[str, Any] | None) -> None:
        self.result.seconds = time.monotonic() - self.t0
        if record is not None and "episodes" in record:  # not a line read half-written
            self.result.episodes = max(self.result.episodes, done)
            self.result.env_steps = max(self.result.env_steps, int(record.get("env_steps", 0)))
        if self.progress is not None:
            self.progress(done, self.opts.episodes)
        if self.result.seconds > self.opts.timeout_s:
            env, limit = self.result.env, self.opts.timeout_s
            raise RuntimeError(f"{env}: {done} episodes in {limit:.0f} s, stopping")

    def _read(self, record: dict[str, Any] | None, must: bool) -> dict[str, Reading] | None:
        """Every process's figures now, or None before the first record and when a /health did
        not answer in time (an error when `must`: a sample needs it)."""
        if record is None:
            return None
        try:
            readings = {ROLLOUT: self._figures(self.rollout, record)}
            for i, server in enumerate(self.servers):
                assert server.child is not None
                readings[_label(i, len(self.servers))] = self._figures(
                    server.child, server.health()
                )
        except OSError:
            if must:
                raise
            return None
        return readings

    @staticmethod
    def _figures(child: Child, report: dict[str, Any]) -> Reading:
        """A process's tree from /proc, its live episodes and tasks from its own report (the
        rollout server's metrics record, an env server's /health)."""
        assert child.pid is not None
        rss, fds = tree_figures(child.pid)
        live, tasks = int(report.get("live_episodes", 0)), int(report.get("asyncio_tasks") or 0)
        return Reading(rss, fds, live, tasks)


def _fds_of(server: EnvServerProcess) -> tuple[int]:
    return (_fds(server),)


def _fds(server: EnvServerProcess) -> int:
    assert server.child is not None and server.child.pid is not None
    return tree_figures(server.child.pid)[1]


def _fewest_at_rest(
    read: Callable[[], tuple[int, ...]],
    before: tuple[int, ...],
    settle_s: float = 10.0,
    steady_s: float = 6.0,
) -> tuple[int, ...]:
    """A process's fewest descriptors (and tasks) once its load is gone (`read`, figure by
    figure): each back at `before`, or none lower for `steady_s` (past the 5 s after which
    clients drop idle kept-alive connections, and their tasks go with them), or at `settle_s`."""
    start = time.monotonic()
    fewest, lowered = read(), start
    while any(f > b for f, b in zip(fewest, before, strict=True)):
        now = time.monotonic()
        if now - start > settle_s or now - lowered > steady_s:
            break
        time.sleep(0.2)
        figures = read()
        if any(f < g for f, g in zip(figures, fewest, strict=True)):
            lowered = time.monotonic()
        fewest = tuple(min(f, g) for f, g in zip(figures, fewest, strict=True))
    return fewest


def _label(i: int, count: int) -> str:
    """The name an env server's samples carry."""
    return "env server" if count == 1 else f"env server {i}"


def _start_env_servers(
    env: str, spec: SoakEnv, count: int, logs: Path, base: dict[str, str]
) -> list[EnvServerProcess]:
    servers, ports = [], PortBook()  # one book: every server's ports distinct
    for i in range(count):
        name = f"{env}-server" if count == 1 else f"{env}-server-{i}"
        server = EnvServerProcess(env, logs, name=name, environ=base, ports=ports)
        servers.append(server.spawn(*spec.server_args))
    return servers
