"""One turn of an episode: the rule every agent follows, whatever schedules its turns.

Contract: `act(step, text, fmt, score)` parses one turn's text in the env's action format and
steps the env with its action through `step` (an unparseable turn is not sent: the parser's
feedback is the next observation and the turn counts as invalid, as does an action the env
refused; a failed step ends the episode as an env failure, with why: `env_failure`). The
token-level agents (the async `AgentLoop` and the `--sync` baseline) keep an `EpisodeState`
per episode and, after each generate call, hand the generation to `play_turn`, which counts
the turn, adds its tokens to the builder, acts on its text and adds the next observation, and
sets `status` when the episode ends:
- the env's `done`                               -> DONE
- the turn cap of the episode's stage             -> TURN_CAP
- the context limit (the builder refuses a turn)  -> TRUNCATED (also `room` finding none left)
- the env step failed                             -> ENV_FAILURE
- the engine aborted the request                  -> ABORTED
What each turn reads is the episode's context (`context.py`: the whole history, or the last k
turns with one sample per turn). `EpisodeState.samples()` are then its `_core.Sample`s, in turn
order, each with the episode's reward (`episode_reward`) and status, and per generated turn the
reward it earned (the change of the env's score, in reward units, and the shaping
`episode_reward` adds, placed by `turn_shaped_rewards`: they sum to the reward) and the key of
the state it acted from (`state_keys.state_key` of what the model last read), which step-level
credit reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from agentgym_rl import _core
from agentgym_rl.config import ActionFormat
from agentgym_rl.episode.actions import parse_action, stop_strings
from agentgym_rl.episode.context import (
    Builds,
    EpisodeContext,
    FullHistory,
    episode_context,
    part_id,
)
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.outcome import judged_score, reward_of
from agentgym_rl.episode.prompts import episode_prefix, observation_message
from agentgym_rl.episode.state_keys import state_key
from agentgym_rl.episode.tools import ToolReader, ToolReading, tool_message
from agentgym_rl.episode.types import EnvSpec, EpisodePlan, Generation
from agentgym_rl.trajectory import ChatTokenizer, Trajectory
from agentgym_rl.wire.types import Status


class EnvStep(Protocol):
    """What a step returned (`_core.StepOutcome` is one)."""

    @property
    def observation(self) -> str: ...
    @property
    def score(self) -> float: ...
    @property
    def done(self) -> bool: ...
    @property
    def invalid(self) -> bool: ...


class EnvStepError(Exception):
    """A step failed in an env client other than the pool (which raises `EnvPoolError`)."""


StepEnv = Callable[[str], Awaitable[EnvStep]]
"""Steps one env episode with an action; raises `_core.EnvPoolError` or `EnvStepError`."""


def env_failure(call: str, error: BaseException) -> str:
    """The reason an env failure is reported with: the failed call and the pool's message."""
    return f"{call}: {error}"


@dataclass(frozen=True, slots=True)
class Acted:
    """What one turn's text did to the episode."""

    observation: str
    """The next user message: the env's observation or the parser's feedback."""
    score: float
    """The env's running score (unchanged when nothing was stepped)."""
    stepped: bool
    """The env was stepped (False: an unparseable turn, or the step failed)."""
    ended: Status | None
    """DONE or ENV_FAILURE when the episode is over, else None."""
    invalid: bool = False
    """The turn did nothing: its text had no action, or the env refused the action."""
    failure: str | None = None
    """Why the step failed, when `ended` is ENV_FAILURE (see `env_failure`)."""
    reply: tuple[dict[str, str], ...] = ()
    """Tool mode: the `tool` messages the turn's calls are answered with (else `observation`
    goes back as one user message)."""
    action: str | None = None
    """The (first) action the turn's text named, stepped or refused; None when it named none."""

    @property
    def messages(self) -> list[dict[str, str]]:
        """What goes back to the model after this turn."""
        return list(self.reply) or [observation_message(self.observation)]


async def act(
    step: StepEnv,
    text: str,
    fmt: ActionFormat,
    score: float,
    *,
    tools: ToolReader | None = None,
    turn: int = 0,
) -> Acted:
    """Parse `text` in `fmt` and step the env with its action (the one turn rule every agent
    follows: training, the sync baseline, evaluation over an API). Tool mode reads the reply's
    calls with `tools` (`turn` numbers the ids of calls written without one)."""
    if fmt is ActionFormat.TOOLS:
        if tools is None:
            raise ValueError("action format 'tools' needs the env's tools")
        return await act_on_calls(step, tools.read(text, turn), score)
    parsed = parse_action(text, fmt)
    if parsed.action is None:
        return Acted(parsed.feedback or "", score, False, None, invalid=True)
    try:
        outcome = await step(parsed.action)
    except (_core.EnvPoolError, EnvStepError) as e:
        return Acted(
            "",
            score,
            False,
            Status.ENV_FAILURE,
            failure=env_failure("step", e),
            action=parsed.action,
        )
    ended = Status.DONE if outcome.done else None
    return Acted(
        outcome.observation,
        outcome.score,
        True,
        ended,
        invalid=outcome.invalid,
        action=parsed.action,
    )


async def act_on_calls(step: StepEnv, reading: ToolReading, score: float) -> Acted:
    """Tool mode's turn: each call of the reply (`ToolReader.read` of its text, or `read_calls`
    of an API's structured calls) steps the env in order (calls beyond `calls_per_turn` and
    after the one that ended the episode are not run) and is answered by one `tool` message;
    the turn is invalid when a call was malformed or refused by the env, or when the reply
    called nothing (then the feedback is a user message)."""
    if not reading.steps:
        return Acted(reading.feedback, score, False, None, invalid=True)
    replies: list[dict[str, str]] = []
    stepped = invalid = False
    action = next((c.action for c in reading.steps if c.action is not None), None)
    ended: Status | None = None
    for call in reading.steps:
        content = call.feedback
        if call.action is None:
            invalid |= not call.refused
        elif ended is not None:
            content = "Not executed: the episode ended with the call before."
        else:
            try:
                outcome = await step(call.action)
            except (_core.EnvPoolError, EnvStepError) as e:
                failure = env_failure("step", e)
                return Acted("", score, stepped, Status.ENV_FAILURE, failure=failure, action=action)
            stepped, score, content = True, outcome.score, outcome.observation
            invalid |= outcome.invalid
            ended = Status.DONE if outcome.done else None
        replies.append(tool_message(content, call.id))
    return Acted(
        replies[0]["content"], score, stepped, ended, invalid, reply=tuple(replies), action=action
    )


def episode_reward(
    score: float,
    status: Status,
    turns: int,
    invalid: int,
    spec: EnvSpec,
    turn_cap: int,
    success: bool | None = None,
) -> float:
    """The reward an episode trains on, shaped by its env's `spec`: the env's score (raised to
    `spec.reward_floor` when set); with an `invalid_penalty`, a failed episode (not an env
    failure) gets `-penalty * invalid / turns` instead; with a `turn_cost`, a success gets
    `score * (1 - turn_cost * turns / turn_cap)`. A success is `score > 0`, unless `success`
    says otherwise (a judged episode: `outcome.judged_score`).

    Why: GRPO learns nothing from a group whose episodes all fail with the same score, and a
    small policy's commonest failure is repeating a refused action until the turn cap. The
    penalty ranks such an episode below one that failed while acting, and keeps success
    exactly `reward > 0`. The floor: an env whose failures score below 0 by what the agent did
    (MiniWoB: -1 for a wrong click, 0 for nothing done) would teach a guessing policy to do
    nothing. The turn cost, as minigrid scores BabyAI (0.9): when every success scores the same,
    a refused action a success repeated is reinforced as much as the one that helped, and a
    greedy policy learns to loop (TextCraft); below 1 a success still scores above 0."""
    score = _floored(score, spec)
    won = score > 0.0 if success is None else success
    if _costs_turns(won, spec, turn_cap):
        return score * (1.0 - spec.turn_cost * min(turns, turn_cap) / turn_cap)
    if _penalised(won, status, turns, spec):
        return -spec.invalid_penalty * invalid / turns
    return score


def turn_shaped_rewards(
    score: float,
    status: Status,
    env_rewards: Sequence[float],
    invalid: Sequence[bool],
    turns: int,
    spec: EnvSpec,
    turn_cap: int,
    success: bool | None = None,
) -> list[float]:
    """Per generated turn, the reward it trains on; they sum to `episode_reward` of the same
    arguments. Each turn keeps the change of the env's score it made (`env_rewards`). With
    `spec.shaping_on` "each_turn" (GiGPO's per-step rewards, what step-level credit reads) the
    shaping lands on the turns that earned it: a failed episode's penalty on each invalid turn
    (`-invalid_penalty / turns` apiece), a success's cost on each turn (`-score x turn_cost /
    turn_cap`); with "last_turn" all of it lands on the last turn (the earlier studies'). What is
    left (the env's score a penalty replaces, a floor, a last turn that left no entry) is the
    last turn's, so a turn's return never counts an earlier turn's shaping."""
    rewards = [float(r) for r in env_rewards]
    if not rewards:
        return rewards
    reward = episode_reward(score, status, turns, sum(invalid), spec, turn_cap, success)
    if spec.shaping_on == "each_turn":
        floored = _floored(score, spec)
        won = floored > 0.0 if success is None else success
        if _costs_turns(won, spec, turn_cap):
            for t in range(min(len(rewards), turn_cap)):
                rewards[t] -= floored * spec.turn_cost / turn_cap
        elif _penalised(won, status, turns, spec):
            for t, refused in enumerate(invalid):
                rewards[t] -= spec.invalid_penalty / turns if refused else 0.0
    rewards[-1] += reward - sum(rewards)
    return rewards


def _floored(score: float, spec: EnvSpec) -> float:
    return score if spec.reward_floor is None else max(score, spec.reward_floor)


def _costs_turns(won: bool, spec: EnvSpec, turn_cap: int) -> bool:
    return won and spec.turn_cost > 0.0 and turn_cap > 0


def _penalised(won: bool, status: Status, turns: int, spec: EnvSpec) -> bool:
    return spec.invalid_penalty > 0.0 and not won and turns > 0 and status is not Status.ENV_FAILURE


def finish_sample(
    plan: EpisodePlan,
    t: Trajectory,
    reward: float,
    status: Status,
    *,
    turn_rewards: Sequence[float] = (),
    turn_keys: Sequence[int] = (),
    request_id: str | None = None,
    turns: int | None = None,
) -> _core.Sample:
    """The `_core.Sample` of a finished trajectory (`TrajectoryBuilder.finish()`); the per-turn
    arrays, when given, have one entry per generated turn. `request_id` and `turns` default to the
    plan's and the trajectory's (a step-wise part names itself and carries the episode's turns)."""
    return _core.Sample(
        t.input_ids,
        t.loss_mask,
        t.logprobs,
        t.versions,
        t.turn_spans,
        reward=float(reward),
        status=status.value,
        drift=t.drift,
        turns=t.turns if turns is None else turns,
        turn_cap=plan.budget.turn_cap,
        stage=plan.budget.stage,
        dispatch_version=plan.dispatch_version,
        request_id=plan.request_id if request_id is None else request_id,
        turn_rewards=np.asarray(turn_rewards, np.float32) if len(turn_rewards) else None,
        turn_keys=np.asarray(turn_keys, np.uint32) if len(turn_keys) else None,
    )


@dataclass
class EpisodeState:
    """One episode from its first observation to its sample; `status` is None while it runs."""

    plan: EpisodePlan
    spec: EnvSpec
    context: EpisodeContext
    """What each turn reads (`context.py`); `context.ids` is the engine's next prompt."""
    chat: ChatTokenizer
    stop_ids: frozenset[int]
    """Left out of a turn's text (the builder keeps them in its tokens)."""
    score: float = 0.0
    turns: int = 0
    invalid: int = 0
    """Turns that did nothing (see `Acted.invalid`)."""
    runaway: int = 0
    """Invalid turns that ran to the token cap: a model that does not stop (eval warns)."""
    status: Status | None = None
    failure: str | None = None
    """Why it ended as an env failure (see `env_failure`)."""
    observed: str = ""
    """The env's last observation the model read: the state the next turn acts from."""
    turn_rewards: list[float] = field(default_factory=list)
    """Per generated turn: the change of the env's score, in reward units."""
    turn_invalid: list[bool] = field(default_factory=list)
    """Per generated turn: whether it did nothing (see `Acted.invalid`)."""
    turn_keys: list[int] = field(default_factory=list)
    """Per generated turn: `state_key` of the state it acted from."""
    last_action: str | None = None
    """The action the previous turn named (normalised), for the repeated-action count."""
    first_observation: str = ""
    """The env's first observation (the task, as a judge reads it)."""
    finished: list[Trajectory] | None = None
    """The context's trajectories once finished (`samples` may be asked again: a judge's)."""
    exchanges: list[tuple[str, str]] = field(default_factory=list)
    """Per generated turn: its text and what came back (a judge's transcript)."""

    @classmethod
    def start(
        cls,
        plan: EpisodePlan,
        spec: EnvSpec,
        chat: ChatTokenizer,
        first_observation: str,
        *,
        max_len: int,
        stop_ids: Sequence[int],
        check_drift: bool,
    ) -> EpisodeState:
        """The episode's prefix (system prompt, first observation) in a fresh context."""
        prefix = episode_prefix(
            plan.task.env, first_observation, spec.action_format, spec.system_prompt
        )
        builds = Builds(
            chat,
            tools=spec.tools.tools.schemas if spec.tools is not None else None,
            max_len=max_len,
            stop_ids=stop_ids,
            check_drift=check_drift,
            prompt_version=plan.dispatch_version,
        )
        context = episode_context(builds, prefix, spec.history_turns)
        return cls(
            plan,
            spec,
            context,
            chat,
            frozenset(stop_ids),
            observed=first_observation,
            first_observation=first_observation,
        )

    @property
    def stop(self) -> tuple[str, ...]:
        """The stop strings of this episode's turns (its action format's)."""
        return stop_strings(self.spec.action_format)

    @property
    def request_id(self) -> str:
        """The engine request id of the next turn."""
        return f"{self.plan.request_id}-t{self.turns}"

    def room(self, max_tokens_per_turn: int) -> int:
        """How many tokens the next turn may generate; with none left the episode ends as
        truncated."""
        n = min(max_tokens_per_turn, self.context.remaining)
        if n <= 0:
            self.status = Status.TRUNCATED
        return n

    def samples(self, judged: float | None = None) -> tuple[_core.Sample, ...]:
        """The finished episode's samples, in turn order (one with the whole history; one per
        turn with a window), each with the episode's reward (`episode_reward`) and status.
        `judged`: a judge's score, which the env's `reward` settings turn into the score the
        reward is shaped from and the success shaping follows (`outcome.judged_score`); the
        env's per-turn rewards keep the env's share of the reward, and the rest lands on the
        last turn."""
        assert self.status is not None, "the episode is still running"
        env = self.plan.task.env
        score, success = reward_of(env, self.score), None
        env_rewards = self.turn_rewards
        if judged is not None:
            rule = self.spec.reward
            kept = 0.0 if rule.source == "judge" else 1.0 - rule.judge_weight
            score, success = judged_score(env, score, judged, rule)
            env_rewards = [kept * r for r in self.turn_rewards]
        turn_cap = self.plan.budget.turn_cap
        reward = episode_reward(
            score, self.status, self.turns, self.invalid, self.spec, turn_cap, success
        )
        rewards = turn_shaped_rewards(
            score,
            self.status,
            env_rewards,
            self.turn_invalid,
            self.turns,
            self.spec,
            turn_cap,
            success,
        )
        if self.finished is None:
            self.finished = self.context.parts()
        parts = self.finished
        if isinstance(self.context, FullHistory):
            sample = finish_sample(
                self.plan,
                parts[0],
                reward,
                self.status,
                turn_rewards=rewards,
                turn_keys=self.turn_keys,
            )
            return (sample,)
        # one generated turn per part, in order: its reward and key are the turn's
        return tuple(
            finish_sample(
                self.plan,
                t,
                reward,
                self.status,
                turn_rewards=rewards[k : k + 1] if t.turns else (),
                turn_keys=self.turn_keys[k : k + 1] if t.turns else (),
                request_id=part_id(self.plan.request_id, k),
                turns=self.turns,
            )
            for k, t in enumerate(parts)
        )


async def play_turn(
    ep: EpisodeState, gen: Generation, step: StepEnv, metrics: RolloutMetrics
) -> None:
    """Everything one generated turn does to its episode; see the module docstring."""
    ep.turns += 1
    metrics.generated_tokens += len(gen.token_ids)
    if gen.finish_reason == "abort" or not gen.token_ids:
        ep.status = Status.ABORTED
        return
    if not ep.context.add_generated(gen.token_ids, gen.logprobs, gen.versions):
        ep.status = Status.TRUNCATED
        return
    env = ep.plan.task.env
    ep.turn_keys.append(state_key(env, ep.observed))
    text = ep.chat.decode([i for i in gen.token_ids if i not in ep.stop_ids])
    acted = await act(
        step, text, ep.spec.action_format, ep.score, tools=ep.spec.tools, turn=ep.turns
    )
    ep.turn_rewards.append(reward_of(env, acted.score) - reward_of(env, ep.score))
    ep.exchanges.append((text, "\n".join(m["content"] for m in acted.messages)))
    ep.turn_invalid.append(bool(acted.invalid))
    if acted.stepped and not acted.invalid:
        # the state changed; a parser's feedback or a refusal is no state (the same text
        # whatever the env's state), so after one the next turn acts from the last real one
        ep.observed = "\n".join(m["content"] for m in acted.messages)
    metrics.env_steps += acted.stepped
    metrics.invalid_actions += acted.invalid
    action = " ".join(acted.action.split()).lower() if acted.action else None
    repeated = action is not None and action == ep.last_action
    metrics.record_turn(ep.turns, acted.action, acted.invalid, repeated=repeated)
    ep.last_action = action
    ep.invalid += acted.invalid
    ep.runaway += acted.invalid and gen.finish_reason == "length"
    ep.score = acted.score
    if acted.ended is not None:
        ep.status, ep.failure = acted.ended, acted.failure
    elif ep.turns >= ep.plan.budget.turn_cap:
        ep.status = Status.TURN_CAP
    elif not ep.context.add_reply(text, acted.messages):
        ep.status = Status.TRUNCATED
