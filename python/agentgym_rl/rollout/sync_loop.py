"""`serve-rollouts --sync`: the reference's synchronous, round-based loop, as a baseline.

Contract: same engine, env servers, builder, action parser and learner stream as the async
path, but the AgentGym-RL way: a batch of `groups_per_step` groups starts together; each turn is
one batched generate for every live episode (a gather of `engine.generate` calls, waiting for
all), then every env step runs in a thread pool through a fresh AgentGym-style HTTP client per
trajectory (`/create`, `/reset`, `/step`, `/close` as plain requests, a new connection per call),
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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentgym_rl import _core
from agentgym_rl.rollout.actions import parse_action
from agentgym_rl.rollout.agent import (
    EnvSpec,
    EpisodePlan,
    EpisodeStatus,
    episode_reward,
    finish_sample,
)
from agentgym_rl.rollout.dataset import TaskSource
from agentgym_rl.rollout.dispatcher import DispatchSummary
from agentgym_rl.rollout.metrics import RolloutMetrics, StatusSink
from agentgym_rl.rollout.prompts import episode_prefix, observation_message
from agentgym_rl.rollout.schedule import TurnSchedule
from agentgym_rl.rollout.sink import LearnerStream
from agentgym_rl.rollout.types import Engine
from agentgym_rl.trajectory import ChatTokenizer, TrajectoryBuilder

log = logging.getLogger(__name__)


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

    def step(self, action: str) -> dict[str, Any]:
        return self._post("/step", {"id": self.id, "action": action})

    def close(self) -> None:
        self._post("/close", {"id": self.id})


@dataclass
class Rollout:
    """One trajectory of the batch."""

    plan: EpisodePlan
    group_id: int
    base: str
    client: HttpEnvClient | None = None
    builder: TrajectoryBuilder | None = None
    score: float = 0.0
    turns: int = 0
    invalid: int = 0  # turns that did nothing (see `agent.episode_reward`)
    status: EpisodeStatus | None = None
    pending: dict[str, str] | None = field(default=None)  # next observation message

    @property
    def live(self) -> bool:
        return self.status is None


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
        except (OSError, RuntimeError, ValueError, KeyError):
            r.status = EpisodeStatus.ENV_FAILURE
            return
        spec = self.envs.get(r.plan.task.env, EnvSpec())
        prefix = episode_prefix(
            r.plan.task.env, str(first["observation"]), spec.action_format, spec.system_prompt
        )
        r.builder = TrajectoryBuilder(
            self.chat,
            prefix,
            max_len=self.max_model_len,
            stop_ids=self.stop_ids,
            check_drift=self.check_drift,
            prompt_version=r.plan.dispatch_version,
        )

    def _step(self, r: Rollout) -> None:
        assert r.client is not None and r.pending is not None
        try:
            out = r.client.step(r.pending["action"])
        except (OSError, RuntimeError, ValueError):
            r.status = EpisodeStatus.ENV_FAILURE
            return
        self.metrics.env_steps += 1
        r.score = float(out.get("score", out.get("reward", 0.0)))
        if out.get("invalid"):
            r.invalid += 1
            self.metrics.invalid_actions += 1
        r.pending = {"observation": str(out["observation"])}
        if out.get("done"):
            r.status = EpisodeStatus.DONE

    def _close(self, r: Rollout) -> None:
        if r.client is not None:
            try:
                r.client.close()
            except (OSError, RuntimeError, ValueError):
                pass

    async def _turn(self, live: list[Rollout], turn: int) -> None:
        for r in live:
            assert r.builder is not None
            if min(self.max_tokens_per_turn, r.builder.remaining) <= 0:
                r.status = EpisodeStatus.TRUNCATED
        live = [r for r in live if r.live]
        with self.metrics.generating():
            gens = await asyncio.gather(
                *(
                    self.engine.generate(
                        r.builder.ids.tolist(),  # type: ignore[union-attr]
                        max_tokens=min(self.max_tokens_per_turn, r.builder.remaining),  # type: ignore[union-attr]
                        request_id=f"{r.plan.request_id}-t{turn}",
                    )
                    for r in live
                )
            )
        stepping = []
        for r, gen in zip(live, gens, strict=True):
            assert r.builder is not None
            r.turns += 1
            self.metrics.generated_tokens += len(gen.token_ids)
            if gen.finish_reason == "abort" or not gen.token_ids:
                r.status = EpisodeStatus.ABORTED
            elif not r.builder.add_generated(gen.token_ids, gen.logprobs, gen.versions):
                r.status = EpisodeStatus.TRUNCATED
            else:
                text = self.chat.decode([i for i in gen.token_ids if i not in self.stop_ids])
                fmt = self.envs.get(r.plan.task.env, EnvSpec()).action_format
                parsed = parse_action(text, fmt)
                if parsed.action is None:
                    self.metrics.invalid_actions += 1
                    r.invalid += 1
                    r.pending = {"observation": parsed.feedback or ""}
                else:
                    r.pending = {"action": parsed.action}
                    stepping.append(r)
        await self._in_threads(self._step, stepping)  # the batch waits for its slowest step
        for r in live:
            if not r.live or r.builder is None:
                continue
            if turn + 1 >= r.plan.budget.cap:
                r.status = EpisodeStatus.TURN_CAP
            elif not r.builder.add_observation(observation_message(r.pending["observation"])):  # type: ignore[index]
                r.status = EpisodeStatus.TRUNCATED

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
        turn = 0
        while live := [r for r in rollouts if r.live]:
            await self._turn(live, turn)
            turn += 1
        await self._in_threads(self._close, rollouts)
        return self._groups(rollouts)

    def _groups(self, rollouts: list[Rollout]) -> list[_core.Group]:
        by_group: dict[int, list[_core.Sample]] = {}
        for r in rollouts:
            assert r.status is not None
            if r.builder is None:  # never started: an empty env-failure sample
                sample = _core.Sample(*_empty_arrays(), reward=0.0, status=r.status.value)
            else:
                spec = self.envs.get(r.plan.task.env, EnvSpec())
                reward = episode_reward(r.score, r.status, r.turns, r.invalid, spec.invalid_penalty)
                sample = finish_sample(r.plan, r.builder, reward, r.status)
            self.metrics.record_episode(sample)
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
