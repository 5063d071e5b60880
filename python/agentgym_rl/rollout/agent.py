"""One episode as one coroutine: env observation -> prompt ids -> engine -> action -> env step.

Contract: `AgentLoop.run(task, ticket-derived fields)` creates and resets an env episode, builds
the prompt (system prompt per env + the first observation as the user message), then per turn
sends the builder's ids to `engine.generate` (token-in/token-out: the sampled ids, logprobs and
versions go into the builder verbatim), parses the action from the turn's text, steps the env
and appends the observation delta. It stops on:
- the env's `done`                               -> status "done"
- the turn cap of the episode's stage             -> status "turn_cap"
- the context limit (the builder refuses a turn)  -> status "truncated"
- an env failure (create/reset/step failed)       -> status "env_failure"
- the engine aborting the request                 -> status "aborted"
and returns a `_core.Sample` with reward = the env's last score (see `episode_reward` for the
optional invalid-turn penalty of failed episodes), the status, turns, turn cap, stage, dispatch
version and the drift flag. An unparseable turn is not sent to the env: the model gets the
parser's feedback as its next observation and the turn counts as invalid, as does a turn whose
action the env refused. `AgentLoop.play` returns the same sample with, for an env failure, why:
the pool's error message prefixed by the call that failed (`create: no server of environment
"babyai" is up: ...`), which evaluation reports.
The env episode is always closed, also when the coroutine is cancelled.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym_rl import _core
from agentgym_rl.config import ActionFormat
from agentgym_rl.rollout.actions import parse_action
from agentgym_rl.rollout.dataset import Task
from agentgym_rl.rollout.metrics import RolloutMetrics
from agentgym_rl.rollout.prompts import episode_prefix, observation_message, system_prompt
from agentgym_rl.rollout.schedule import TurnBudget
from agentgym_rl.rollout.types import Engine
from agentgym_rl.trajectory import ChatTokenizer, TrajectoryBuilder


class EpisodeStatus(str, enum.Enum):
    """How an episode ended (the `status` of its `_core.Sample`)."""

    DONE = "done"
    TURN_CAP = "turn_cap"
    TRUNCATED = "truncated"
    ENV_FAILURE = "env_failure"
    ABORTED = "aborted"


@dataclass(frozen=True, slots=True)
class EnvSpec:
    """How the agent talks to one env: action format and optional system prompt override."""

    action_format: ActionFormat = ActionFormat.REACT
    system_prompt: str | None = None
    invalid_penalty: float = 0.0
    """See `episode_reward` (0: the reward is the env's score)."""


@dataclass(frozen=True, slots=True)
class Played:
    """A finished episode's sample and, when it ended as an env failure, why."""

    sample: _core.Sample
    failure: str | None = None
    """`<call>: <the pool's error message>` (call: create, reset or step)."""


def env_failure(call: str, error: BaseException) -> str:
    """The reason an env failure is reported with: the failed call and the pool's message."""
    return f"{call}: {error}"


@dataclass(frozen=True, slots=True)
class EpisodePlan:
    """What the dispatcher decided for one episode: the task and the version it runs under."""

    task: Task
    dispatch_version: int
    budget: TurnBudget
    request_id: str


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
        self._stop_set = set(self.stop_ids)
        self.check_drift = check_drift
        self.metrics = metrics if metrics is not None else RolloutMetrics()

    async def run(self, plan: EpisodePlan) -> _core.Sample:
        return (await self.play(plan)).sample

    async def play(self, plan: EpisodePlan) -> Played:
        """`run`, also saying why an episode ended as an env failure."""
        spec = self.envs.get(plan.task.env, EnvSpec())
        try:
            created = await self.pool.create(plan.task.env)
        except _core.EnvPoolError as e:
            return Played(self._failed_start(plan, spec), env_failure("create", e))
        try:
            try:
                first = await self.pool.reset(created.episode, plan.task.data_idx)
            except _core.EnvPoolError as e:
                return Played(self._failed_start(plan, spec), env_failure("reset", e))
            return await self._turns(plan, spec, created.episode, first.observation)
        finally:
            with contextlib.suppress(_core.EnvPoolError):
                await self.pool.close(created.episode)

    async def _turns(
        self, plan: EpisodePlan, spec: EnvSpec, episode: int, first_observation: str
    ) -> Played:
        prefix = episode_prefix(
            plan.task.env, first_observation, spec.action_format, spec.system_prompt
        )
        builder = TrajectoryBuilder(
            self.chat,
            prefix,
            max_len=self.max_model_len,
            stop_ids=self.stop_ids,
            check_drift=self.check_drift,
            prompt_version=plan.dispatch_version,
        )
        score, turn, invalid = 0.0, 0, 0
        failure: str | None = None
        while True:
            max_tokens = min(self.max_tokens_per_turn, builder.remaining)
            if max_tokens <= 0:
                status = EpisodeStatus.TRUNCATED
                break
            with self.metrics.generating():
                gen = await self.engine.generate(
                    builder.ids.tolist(),
                    max_tokens=max_tokens,
                    request_id=f"{plan.request_id}-t{turn}",
                    **self.sampling,
                )
            turn += 1
            self.metrics.generated_tokens += len(gen.token_ids)
            if gen.finish_reason == "abort" or not gen.token_ids:
                status = EpisodeStatus.ABORTED
                break
            if not builder.add_generated(gen.token_ids, gen.logprobs, gen.versions):
                status = EpisodeStatus.TRUNCATED
                break
            text = self.chat.decode([i for i in gen.token_ids if i not in self._stop_set])
            acted = await act(self.pool, episode, text, spec.action_format, score)
            self.metrics.env_steps += acted.stepped
            self.metrics.invalid_actions += acted.invalid
            invalid += acted.invalid
            score, observation = acted.score, acted.observation
            if acted.ended is not None:
                status, failure = acted.ended, acted.failure
                break
            if turn >= plan.budget.cap:
                status = EpisodeStatus.TURN_CAP
                break
            if not builder.add_observation(observation_message(observation)):
                status = EpisodeStatus.TRUNCATED
                break
        reward = episode_reward(score, status, turn, invalid, spec.invalid_penalty)
        return Played(self._sample(plan, builder, reward, status), failure)

    def _sample(
        self, plan: EpisodePlan, builder: TrajectoryBuilder, reward: float, status: EpisodeStatus
    ) -> _core.Sample:
        sample = finish_sample(plan, builder, reward, status)
        self.metrics.record_episode(sample)
        return sample

    def _failed_start(self, plan: EpisodePlan, spec: EnvSpec) -> _core.Sample:
        """An episode whose env never started: the system prompt only, nothing to train on."""
        text = system_prompt(plan.task.env, spec.action_format, spec.system_prompt)
        ids = np.asarray(self.chat.apply_chat_template([{"role": "system", "content": text}]))
        n = len(ids)
        sample = _core.Sample(
            ids.astype(np.uint32),
            np.zeros(n, np.uint8),
            np.zeros(n, np.float32),
            np.full(n, plan.dispatch_version, np.uint32),
            np.zeros(0, np.uint32),
            reward=0.0,
            status=EpisodeStatus.ENV_FAILURE.value,
            turn_cap=plan.budget.cap,
            stage=plan.budget.stage,
            dispatch_version=plan.dispatch_version,
        )
        self.metrics.record_episode(sample)
        return sample


@dataclass(frozen=True, slots=True)
class Acted:
    """What one turn's text did to the episode."""

    observation: str
    """The next user message: the env's observation or the parser's feedback."""
    score: float
    """The env's running score (unchanged when nothing was stepped)."""
    stepped: bool
    """The env was stepped (False: an unparseable turn, or the step failed)."""
    ended: EpisodeStatus | None
    """DONE or ENV_FAILURE when the episode is over, else None."""
    invalid: bool = False
    """The turn did nothing: its text had no action, or the env refused the action."""
    failure: str | None = None
    """Why the step failed, when `ended` is ENV_FAILURE (see `env_failure`)."""


async def act(
    pool: _core.EnvPool, episode: int, text: str, fmt: ActionFormat, score: float
) -> Acted:
    """Parse `text` in `fmt` and step the env with its action (the one turn rule every agent
    follows: training, evaluation over an API). An unparseable turn is not sent to the env."""
    parsed = parse_action(text, fmt)
    if parsed.action is None:
        return Acted(parsed.feedback or "", score, False, None, invalid=True)
    try:
        outcome = await pool.step(episode, parsed.action)
    except _core.EnvPoolError as e:
        return Acted("", score, False, EpisodeStatus.ENV_FAILURE, failure=env_failure("step", e))
    ended = EpisodeStatus.DONE if outcome.done else None
    return Acted(outcome.observation, outcome.score, True, ended, invalid=outcome.invalid)


def episode_reward(
    score: float, status: EpisodeStatus, turns: int, invalid: int, penalty: float
) -> float:
    """The env's score; with a `penalty`, a failed episode (score <= 0, not an env failure)
    gets `-penalty * invalid / turns` instead.

    Why: GRPO learns nothing from a group whose episodes all fail with the same score, and a
    small policy's commonest failure is repeating a refused action until the turn cap. The
    penalty ranks such an episode below one that failed while acting, and keeps success
    exactly `reward > 0`."""
    if penalty <= 0.0 or score > 0.0 or turns == 0 or status is EpisodeStatus.ENV_FAILURE:
        return score
    return -penalty * invalid / turns


def finish_sample(
    plan: EpisodePlan, builder: TrajectoryBuilder, reward: float, status: EpisodeStatus
) -> _core.Sample:
    """The `_core.Sample` of a finished episode (runs the builder's drift check)."""
    t = builder.finish()
    return _core.Sample(
        t.input_ids,
        t.loss_mask,
        t.logprobs,
        t.versions,
        t.turn_spans,
        reward=float(reward),
        status=status.value,
        drift=t.drift,
        turns=t.turns,
        turn_cap=plan.budget.cap,
        stage=plan.budget.stage,
        dispatch_version=plan.dispatch_version,
    )
