"""`serve-rollouts --sync`: the reference's synchronous, round-based loop, as a baseline.

Contract: same engine, env servers, builder, turn rule (`episode/turn.py`: action parsing,
invalid turns, penalties, statuses) and learner stream as the async path, but the AgentGym-RL
way: a batch of `groups_per_step` groups starts together; each turn is one batched generate for
every live episode (a gather of `engine.generate` calls, waiting for all), then every env step
runs in a thread pool through a fresh AgentGym-style HTTP client per trajectory (`/create`, `/reset`, `/step`, `/close` as plain requests, a new connection per call),
and the whole batch waits for its slowest member before the next turn or batch. Groups are
streamed when the batch ends; a learner that does not take them stalls the loop. Only `http://`
env addresses in the AgentGym dialect (`id`/`data_idx` keys) work here: the reference's client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym_rl import _core
from agentgym_rl.episode.dataset import TaskSource
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.turn import EnvStepError, EpisodeState, StepEnv, play_turn
from agentgym_rl.episode.types import Engine, EnvSpec, EpisodePlan
from agentgym_rl.rollout.dispatcher import DispatchSummary
from agentgym_rl.rollout.schedule import TurnSchedule
from agentgym_rl.rollout.sink import LearnerStream
from agentgym_rl.rollout.status import StatusSink
from agentgym_rl.trajectory import ChatTokenizer
from agentgym_rl.wire.types import Status

log = logging.getLogger(__name__)
_CLIENT_ERRORS = (OSError, RuntimeError, ValueError)


@dataclass(frozen=True, slots=True)
class HttpStep:
    """A `/step` reply (the fields `turn.act` reads)."""

    observation: str
    score: float
    done: bool
    invalid: bool


class HttpEnvClient:
    """One per trajectory, like AgentGym's env clients: a plain HTTP request per call."""

    def __init__(self, base: str, timeout_s: float = 60.0) -> None:
        self.base, self.timeout_s = base.rstrip("/"), timeout_s
        self.id = int(self._post("/create", {})["id"])

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.base + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=self.timeout_s) as r:
            reply = json.loads(r.read())
        if isinstance(reply, dict) and "error" in reply:
            raise RuntimeError(f"{path}: {reply['error']}")
        return reply

    def reset(self, data_idx: int) -> dict[str, Any]:
        return self._post("/reset", {"id": self.id, "data_idx": data_idx})

    def step(self, action: str) -> HttpStep:
        """Raises `EnvStepError` when the request or the server failed."""
        try:
            out = self._post("/step", {"id": self.id, "action": action})
        except _CLIENT_ERRORS as e:
            raise EnvStepError(str(e)) from e
        score = float(out.get("score", out.get("reward", 0.0)))
        return HttpStep(
            str(out["observation"]), score, bool(out.get("done")), bool(out.get("invalid"))
        )

    def close(self) -> None:
        self._post("/close", {"id": self.id})


@dataclass
class Rollout:
    """One trajectory of the batch; `episode` stays None when its env did not start."""

    plan: EpisodePlan
    group_id: int
    base: str
    client: HttpEnvClient | None = None
    episode: EpisodeState | None = None

    @property
    def live(self) -> bool:
        return self.episode is not None and self.episode.status is None


class SyncLoop:
    """Runs batches until the source is exhausted, `max_batches` ran, or `stop()`."""

    def __init__(
        self,
        engine: Engine,
        chat: ChatTokenizer,
        stream: LearnerStream,
        source: TaskSource,
        schedule: TurnSchedule,
        *,
        addresses: Mapping[str, Sequence[str]],
        envs: Mapping[str, EnvSpec],
        group_size: int,
        groups_per_step: int,
        max_model_len: int,
        max_tokens_per_turn: int,
        version_source: Callable[[], int],
        metrics: RolloutMetrics | None = None,
        status: StatusSink | None = None,
        threads: int = 64,
        check_drift: bool = True,
    ) -> None:
        for env, addrs in addresses.items():
            if not all(a.startswith("http") for a in addrs):
                raise ValueError(f"--sync needs http:// addresses for {env}, got {list(addrs)}")
        self.engine, self.chat, self.stream = engine, chat, stream
        self.source, self.schedule = source, schedule
        self.addresses = {k: list(v) for k, v in addresses.items()}
        self.envs, self.group_size, self.groups_per_step = dict(envs), group_size, groups_per_step
        self.max_model_len, self.max_tokens_per_turn = max_model_len, max_tokens_per_turn
        self.version_source = version_source
        self.metrics = metrics if metrics is not None else RolloutMetrics()
        self.status, self.check_drift = status, check_drift
        self.threads = ThreadPoolExecutor(max_workers=threads)
        eos = chat.eos_token_id
        self.stop_ids = [] if eos is None else [eos]
        self._stopping = False
        self._next_group = 0

    def stop(self) -> None:
        self._stopping = True

    async def _in_threads(self, fn: Callable[[Rollout], None], rollouts: list[Rollout]) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(self.threads, fn, r) for r in rollouts))

    def _start(self, r: Rollout) -> None:
        try:
            r.client = HttpEnvClient(r.base)
            first = r.client.reset(r.plan.task.data_idx)
        except (*_CLIENT_ERRORS, KeyError):
            return  # no episode: an env failure
        r.episode = EpisodeState.start(
            r.plan,
            self.envs.get(r.plan.task.env, EnvSpec()),
            self.chat,
            str(first["observation"]),
            max_len=self.max_model_len,
            stop_ids=self.stop_ids,
            check_drift=self.check_drift,
        )

    def _close(self, r: Rollout) -> None:
        if r.client is not None:
            try:
                r.client.close()
            except _CLIENT_ERRORS:
                pass

    def _stepper(self, client: HttpEnvClient | None) -> StepEnv:
        """Steps through `client` in the thread pool (the reference's blocking client)."""
        assert client is not None
        loop = asyncio.get_running_loop()
        return lambda action: loop.run_in_executor(self.threads, client.step, action)

    async def _turn(self, live: list[Rollout]) -> None:
        """One batched generate for every live episode, then each plays its turn (`play_turn`,
        the async agent's turn rule) with its step in the thread pool; the batch waits for its
        slowest member."""
        ready = []
        for r in live:
            assert r.episode is not None
            if (max_tokens := r.episode.room(self.max_tokens_per_turn)) > 0:
                ready.append((r, r.episode, max_tokens))
        with self.metrics.generating():
            gens = await asyncio.gather(
                *(
                    self.engine.generate(
                        ep.builder.ids.tolist(),
                        max_tokens=max_tokens,
                        request_id=ep.request_id,
                        stop=ep.stop,
                    )
                    for _, ep, max_tokens in ready
                )
            )
        await asyncio.gather(
            *(
                play_turn(ep, gen, self._stepper(r.client), self.metrics)
                for (r, ep, _), gen in zip(ready, gens, strict=True)
            )
        )

    async def batch(self) -> list[_core.Group] | None:
        """Run one batch to completion; None when the source has no task left."""
        version = int(self.version_source())
        budget = self.schedule.budget(version)
        rollouts: list[Rollout] = []
        for _ in range(self.groups_per_step):
            task = self.source.next()
            if task is None:
                break
            gid, self._next_group = self._next_group, self._next_group + 1
            bases = self.addresses[task.env]
            for i in range(self.group_size):
                plan = EpisodePlan(task, version, budget, f"sync-g{gid}-e{i}")
                rollouts.append(Rollout(plan, gid, bases[len(rollouts) % len(bases)]))
        if not rollouts:
            return None
        await self._in_threads(self._start, rollouts)
        while live := [r for r in rollouts if r.live]:
            await self._turn(live)
        await self._in_threads(self._close, rollouts)
        return self._groups(rollouts)

    def _groups(self, rollouts: list[Rollout]) -> list[_core.Group]:
        by_group: dict[int, list[_core.Sample]] = {}
        for r in rollouts:
            if r.episode is None:  # never started: an empty env-failure sample
                sample = _core.Sample(*_empty_arrays(), reward=0.0, status=Status.ENV_FAILURE.value)
            else:
                sample = r.episode.sample()
            self.metrics.record_episode(sample, r.plan.task.env)
            by_group.setdefault(r.group_id, []).append(sample)
        firsts = {r.group_id: r.plan.task for r in reversed(rollouts)}
        return [
            _core.Group(gid, firsts[gid].item_id, firsts[gid].env, samples)
            for gid, samples in by_group.items()
        ]

    async def _send(self, group: _core.Group) -> None:
        payload = _core.encode_group(group)
        while True:  # the synchronous loop simply stalls until the learner takes the group
            try:
                await asyncio.to_thread(self.stream.send, payload)
                self.metrics.record_sent(group, int(self.version_source()))
                return
            except _core.TransportTimeout:
                self.metrics.send_timeouts += 1
                if self._stopping:
                    raise

    async def run(self, max_batches: int | None = None) -> DispatchSummary:
        batches, unsent = 0, 0
        try:
            while not self._stopping and (max_batches is None or batches < max_batches):
                groups = await self.batch()
                if groups is None:
                    break
                batches += 1
                for i, group in enumerate(groups):
                    try:
                        await self._send(group)
                    except _core.TransportTimeout:
                        unsent += len(groups) - i
                        break
                if self.status is not None:
                    self.status.write(self.metrics.snapshot())
            try:
                await asyncio.to_thread(self.stream.flush, 10.0)
            except _core.TransportError as e:
                log.warning("not every sent group was acknowledged: %s", e)
        finally:
            self.threads.shutdown(wait=False)
        return DispatchSummary(
            self.metrics.groups_sent, self.metrics.episodes, 0, unsent, {"batches": batches}
        )


def _empty_arrays() -> tuple[Any, ...]:
    z = np.zeros(0, np.uint32)
    return z, np.zeros(0, np.uint8), np.zeros(0, np.float32), z, z
