"""A user's own agent as the rollout server's episode player: each episode of a GRPO group is one
run of the agent against the gateway.

Contract: `UserAgents.play(plan)` (the `Player` the dispatcher drives, like `AgentLoop`) opens an
episode on the gateway under the plan's request id (its key), version and turn cap, then runs the
agent on an `AgentTask`:
- a Python callable `async def agent(client, task) -> reward`, `client` an `openai.AsyncOpenAI`
  bound to the endpoint with the episode's key in every request's `X-Episode-Key` header;
- or a command line, run with `OPENAI_BASE_URL`, `OPENAI_API_KEY` (the endpoint's bearer token),
  `AGENTGYM_EPISODE_KEY` and `AGENTGYM_TASK` (the task as JSON) in its environment; it posts the
  reward to `/v1/episodes/{key}/reward`, or prints `{"reward": x}` as its last line.
The episode's samples (one per token-consistent segment) become the `Played` the dispatcher puts
in the group. An agent that raises, exits non-zero, exceeds `timeout_s`, makes no call or gives
no reward raises `AgentFailure`: the episode is dropped (nothing of it trains) and the dispatcher
aborts its group, counted like any aborted group. The held-out evaluation's player (`held_out`)
scores such an episode 0 instead (`Played.failure` says why) and goes on.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from agentgym_rl import _core
from agentgym_rl.episode.agent import Played
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.types import Engine, EpisodePlan
from agentgym_rl.gateway.app import Gateway
from agentgym_rl.wire.types import Status

log = logging.getLogger(__name__)

AgentFn = Callable[[Any, "AgentTask"], Awaitable[float]]


class AgentFailure(RuntimeError):
    """A user agent's episode that cannot train (why is the message)."""


@dataclass(frozen=True, slots=True)
class AgentTask:
    """What a user's agent is told about its episode."""

    item_id: str
    env: str
    data_idx: int
    env_url: str | None
    """An HTTP address of one of the env's servers (AgentGym's protocol), when it has one."""
    turn_cap: int
    """Calls the endpoint answers for this episode (ScalingInter's cap at its version)."""
    episode_key: str


def load_agent(reference: str) -> AgentFn:
    """The callable `module:function` names (the working directory importable)."""
    module, _, name = reference.partition(":")
    if not module or not name:
        raise ValueError(f"agent {reference!r} is not module:function")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    fn = getattr(importlib.import_module(module), name, None)
    if fn is None or not callable(fn):
        raise ValueError(f"agent {reference!r}: {module} has no callable {name!r}")
    return fn  # type: ignore[no-any-return]


class UserAgents:
    """Plays each episode with a user's agent; see the module docstring."""

    def __init__(
        self,
        gateway: Gateway,
        base_url: str,
        token: str,
        *,
        agent: AgentFn | None = None,
        command: Sequence[str] = (),
        env_urls: Mapping[str, Sequence[str]] | None = None,
        timeout_s: float = 600.0,
        metrics: RolloutMetrics | None = None,
        sampling: Mapping[str, Any] | None = None,
        held_out: bool = False,
    ) -> None:
        if (agent is None) == (not command):
            raise ValueError("give the agent as a callable or as a command, one of the two")
        self.gateway, self.base_url, self.token = gateway, base_url, token
        self.agent, self.command = agent, list(command)
        self.env_urls = {env: list(urls) for env, urls in (env_urls or {}).items()}
        self.timeout_s = timeout_s
        self.metrics = metrics if metrics is not None else RolloutMetrics()
        self.sampling = dict(sampling or {})
        self.held_out = held_out
        self._turn = 0

    @property
    def engine(self) -> Engine:
        return self.gateway.engine

    async def run(self, plan: EpisodePlan) -> _core.Sample:
        """`play`'s sample, a failed agent episode scored 0 (see `held_out`)."""
        return (await self._scored(plan)).sample

    async def _scored(self, plan: EpisodePlan) -> Played:
        try:
            return await self._play(plan)
        except AgentFailure as e:
            log.warning("held-out %s", e)
            sample = _core.Sample(
                np.zeros(1, np.uint32),
                np.zeros(1, np.uint8),
                np.zeros(1, np.float32),
                np.full(1, plan.dispatch_version, np.uint32),
                np.zeros(0, np.uint32),
                reward=0.0,
                status=Status.ABORTED.value,
                turn_cap=plan.budget.turn_cap,
                dispatch_version=plan.dispatch_version,
                request_id=plan.request_id,
            )
            return Played((sample,), str(e))

    def task(self, plan: EpisodePlan) -> AgentTask:
        urls = self.env_urls.get(plan.task.env)
        self._turn += 1
        return AgentTask(
            plan.task.item_id,
            plan.task.env,
            plan.task.data_idx,
            urls[self._turn % len(urls)] if urls else None,
            plan.budget.turn_cap,
            plan.request_id,
        )

    async def play(self, plan: EpisodePlan) -> Played:
        """The episode's samples; a failed agent raises `AgentFailure` (its group is aborted),
        but with `held_out` it scores 0 (a sample of one untrained token, status aborted, the
        failure said in `Played.failure`): an evaluation counts it and goes on."""
        return await (self._scored(plan) if self.held_out else self._play(plan))

    async def _play(self, plan: EpisodePlan) -> Played:
        key = plan.request_id
        self.gateway.open(
            key,
            version=plan.dispatch_version,
            turn_cap=plan.budget.turn_cap,
            stage=plan.budget.stage,
            sampling=self.sampling,
            metrics=self.metrics,
        )
        task = self.task(plan)
        try:
            reward = await asyncio.wait_for(self._run(task), self.timeout_s)
            samples = self._samples(key, reward)
        except TimeoutError:
            self.gateway.drop(key)
            raise AgentFailure(
                f"episode {key}: the agent gave no reward in {self.timeout_s:g} s"
            ) from None
        except AgentFailure:
            self.gateway.drop(key)
            raise
        except Exception as e:
            self.gateway.drop(key)
            raise AgentFailure(f"episode {key}: the agent raised {e!r}") from e
        played = Played(tuple(samples), forks=self.gateway.claim_forks(key))
        # one episode, whatever its segments
        self.metrics.record_episode(played.sample, plan.task.env, drift=played.drift)
        return played

    def _samples(self, key: str, reward: float | None) -> list[Any]:
        samples = self.gateway.claim(key)
        if samples is None:
            episode = self.gateway.episodes.get(key)
            if episode is None or not episode.sampled:
                raise AgentFailure(f"episode {key}: the agent made no call to the endpoint")
            if reward is None:
                raise AgentFailure(f"episode {key}: the agent gave no reward")
            self.gateway.reward(key, {"reward": reward})
            samples = self.gateway.claim(key) or []
        if not samples:
            raise AgentFailure(f"episode {key}: the agent made no call to the endpoint")
        return samples

    async def _run(self, task: AgentTask) -> float | None:
        if self.agent is not None:
            import openai

            client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self.token,
                default_headers={"X-Episode-Key": task.episode_key},
                max_retries=0,
                # plain HTTP to this server: loading the CA store per episode cost ~25 ms of CPU
                http_client=openai.DefaultAsyncHttpxClient(verify=False, timeout=self.timeout_s),
            )
            try:
                return float(await self.agent(client, task))
            finally:
                await client.close()
        return await self._run_command(task)

    async def _run_command(self, task: AgentTask) -> float | None:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_KEY": self.token,
            "AGENTGYM_EPISODE_KEY": task.episode_key,
            "AGENTGYM_TASK": json.dumps(asdict(task)),
        }
        proc = await asyncio.create_subprocess_exec(
            *self.command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        try:
            out, err = await proc.communicate()
        except asyncio.CancelledError:
            proc.kill()
            raise
        if proc.returncode != 0:
            tail = err.decode(errors="replace").strip().splitlines()[-3:]
            raise AgentFailure(f"the agent command exited {proc.returncode}: {' | '.join(tail)}")
        lines = out.decode(errors="replace").strip().splitlines()
        try:
            last = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            return None
        value = last.get("reward") if isinstance(last, dict) else None
        return float(value) if isinstance(value, (int, float)) else None
