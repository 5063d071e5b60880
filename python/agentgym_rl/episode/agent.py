"""One episode as one coroutine: env observation -> prompt ids -> engine -> action -> env step.

Contract: `AgentLoop.run(plan)` creates and resets an env episode, builds the prompt (system
prompt per env + the first observation as the user message), then per turn sends the context's
ids (`context.py`: the whole history, or the last k turns) to `engine.generate` (token-in/
token-out: the sampled ids, logprobs and versions go into the trajectory verbatim) and hands the
generation to `turn.play_turn` (the turn rule the `--sync` baseline follows too: action parsing,
invalid turns, env step, statuses). It stops on the statuses listed in `turn.py`, or on an env
failure of create or reset (status "env_failure", a sample of the system prompt only), and
returns the episode's last `_core.Sample`, with reward = the env's last score (see
`turn.episode_reward` for the optional shaping), the status, turns, turn cap, stage, dispatch
version and the drift flag. `AgentLoop.play` returns all its samples (`Played`: one, or one per
turn with step-wise context) with, for an env failure, why: the pool's error message prefixed by
the call that failed (`create: no server of environment "babyai" is up: ...`), which evaluation
reports. The env episode is always closed, also when the coroutine is cancelled.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import numpy as np

from agentgym_rl import _core
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.prompts import system_prompt
from agentgym_rl.episode.turn import EpisodeState, env_failure, play_turn
from agentgym_rl.episode.types import Engine, EnvSpec, EpisodePlan
from agentgym_rl.trajectory import ChatTokenizer
from agentgym_rl.wire.types import Status

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Played:
    """A finished episode's samples and, when it ended as an env failure, why."""

    samples: tuple[_core.Sample, ...]
    """In order, at least one: the episode's one sample, or its parts (a turn each with
    step-wise context, `context.py`; a user agent's segments), each trained as a sample of the
    episode with its reward."""
    failure: str | None = None
    """`<call>: <the pool's error message>` (call: create, reset or step)."""
    invalid: int | None = None
    """Its turns that did nothing (None: not counted, a user agent's episode)."""
    runaway: int = 0
    """Of those, the turns that ran to the token cap (`EpisodeState.runaway`)."""
    forks: int = 0
    """A user agent's episode: segments forked off (`gateway/episodes.py`)."""
    state: EpisodeState | None = None
    """The training agent's finished episode, from which a judge's score rescores `samples`."""
    judged: dict[str, Any] | None = None
    """A judge's verdict on it (`judging.judge.Verdict.to_dict`), when one scored it."""

    @property
    def sample(self) -> _core.Sample:
        """The last sample: it carries the episode's reward, status and (step-wise) turns."""
        return self.samples[-1]

    @property
    def drift(self) -> bool:
        return any(s.drift for s in self.samples)


class AgentLoop:
    """Runs episodes against one engine and one env pool; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        pool: _core.EnvPool,
        chat: ChatTokenizer,
        *,
        envs: Mapping[str, EnvSpec],
        max_model_len: int,
        max_tokens_per_turn: int,
        stop_ids: Sequence[int] | None = None,
        check_drift: bool = True,
        metrics: RolloutMetrics | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> None:
        self.engine, self.pool, self.chat = engine, pool, chat
        # extra keyword arguments of every `engine.generate` call (evaluation: a temperature)
        self.sampling = dict(sampling or {})
        self.envs = dict(envs)
        self.max_model_len = max_model_len
        self.max_tokens_per_turn = max_tokens_per_turn
        if stop_ids is None:
            eos = chat.eos_token_id
            stop_ids = [] if eos is None else [eos]
        self.stop_ids = [int(i) for i in stop_ids]
        self.check_drift = check_drift
        self.metrics = metrics if metrics is not None else RolloutMetrics()

    async def run(self, plan: EpisodePlan) -> _core.Sample:
        return (await self.play(plan)).sample

    async def play(self, plan: EpisodePlan) -> Played:
        """`run`, also saying why an episode ended as an env failure."""
        spec = self.envs.get(plan.task.env, EnvSpec())
        return await in_env_episode(
            self.pool,
            plan.task.env,
            plan.task.data_idx,
            lambda episode, first: self._turns(plan, spec, episode, first),
            lambda reason: Played((self._failed_start(plan, spec),), reason, 0),
        )

    async def _turns(
        self, plan: EpisodePlan, spec: EnvSpec, episode: int, first_observation: str
    ) -> Played:
        ep = EpisodeState.start(
            plan,
            spec,
            self.chat,
            first_observation,
            max_len=self.max_model_len,
            stop_ids=self.stop_ids,
            check_drift=self.check_drift,
        )
        step = partial(self.pool.step, episode)
        while ep.status is None and (max_tokens := ep.room(self.max_tokens_per_turn)) > 0:
            prompt = ep.context.ids.tolist()
            with self.metrics.generating(len(prompt)):
                gen = await self.engine.generate(
                    prompt,
                    max_tokens=max_tokens,
                    request_id=ep.request_id,
                    stop=ep.stop,
                    **self.sampling,
                )
            await play_turn(ep, gen, step, self.metrics)
        played = Played(ep.samples(), ep.failure, ep.invalid, runaway=ep.runaway, state=ep)
        self.metrics.record_episode(played.sample, plan.task.env, drift=played.drift)
        return played

    def _failed_start(self, plan: EpisodePlan, spec: EnvSpec) -> _core.Sample:
        sample = failed_start(plan, spec, self.chat)
        self.metrics.record_episode(sample, plan.task.env)
        return sample


async def in_env_episode(
    pool: _core.EnvPool,
    env: str,
    data_idx: int,
    turns: Callable[[int, str], Awaitable[T]],
    failed: Callable[[str], T],
) -> T:
    """An env episode's life around its turns, for every policy (the training agent and eval's
    chat API): create an episode of `env`, reset it to `data_idx`, `turns(episode, first
    observation)`, and close it whatever happens. A refused create or reset gives
    `failed(reason)`."""
    try:
        created = await pool.create(env)
    except _core.EnvPoolError as e:
        return failed(env_failure("create", e))
    try:
        try:
            first = await pool.reset(created.episode, data_idx)
        except _core.EnvPoolError as e:
            return failed(env_failure("reset", e))
        return await turns(created.episode, first.observation)
    finally:
        with contextlib.suppress(_core.EnvPoolError):
            await pool.close(created.episode)


def failed_start(plan: EpisodePlan, spec: EnvSpec, chat: ChatTokenizer) -> _core.Sample:
    """An episode whose env never started: the system prompt only, nothing to train on."""
    text = system_prompt(plan.task.env, spec.action_format, spec.system_prompt)
    tools = spec.tools.tools.schemas if spec.tools is not None else None
    ids = np.asarray(chat.apply_chat_template([{"role": "system", "content": text}], tools=tools))
    n = len(ids)
    return _core.Sample(
        ids.astype(np.uint32),
        np.zeros(n, np.uint8),
        np.zeros(n, np.float32),
        np.full(n, plan.dispatch_version, np.uint32),
        np.zeros(0, np.uint32),
        reward=0.0,
        status=Status.ENV_FAILURE.value,
        turn_cap=plan.budget.turn_cap,
        stage=plan.budget.stage,
        dispatch_version=plan.dispatch_version,
        request_id=plan.request_id,
    )
