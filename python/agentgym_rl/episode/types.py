"""Carriers of one episode: what the engine returns, what the agent loop depends on, and what
an episode is told before it starts.

`Engine` is the contract between the agent loops (`agent.py`, the rollout server's `--sync`
baseline) and the inference engine (`inference/engine.py`, vLLM). The episode layer never
imports vLLM; anything that satisfies `Engine` can drive it. `EpisodePlan` is what
a dispatcher (training) or an evaluation decided for one episode: the task, the policy version
it runs under, its turn budget (`TurnBudget`, from `rollout/schedule.py` for training) and the
request id its generate calls are named after. `EnvSpec` is how the agent talks to one env.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from agentgym_rl.config import ActionFormat
from agentgym_rl.config.rollout import RewardConfig, ShapingOn
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.tools import ToolReader

FinishReason = Literal["stop", "length", "abort"]
ENV_REWARD = RewardConfig()
"""Rewards from the env alone (no judge)."""


@dataclass(frozen=True, slots=True)
class Generation:
    """One generated turn, token-in/token-out.

    `token_ids` are the sampled ids exactly as the engine produced them (the stop token included
    when the turn ended on one); `logprobs[i]` is the log-probability of `token_ids[i]` under the
    distribution actually sampled from (after temperature/top-p: vLLM's "processed_logprobs");
    `versions[i]` is the policy version of the weights that produced token i (a turn that spans a
    live weight update carries two versions).
    """

    token_ids: list[int]
    logprobs: list[float]
    versions: list[int]
    finish_reason: FinishReason


class Engine(Protocol):
    """What the agent loop needs from an inference engine."""

    @property
    def version(self) -> int:
        """The policy version of the weights currently loaded."""
        ...

    async def generate(
        self, prompt_ids: list[int], *, max_tokens: int, request_id: str, stop: Sequence[str] = ()
    ) -> Generation:
        """Continue `prompt_ids` by one assistant turn: it ends at the model's stop tokens or
        right after the first of the `stop` strings it writes (the string kept)."""
        ...


@dataclass(frozen=True, slots=True)
class TurnBudget:
    """The stage an episode runs in and its turn cap; every sample carries both."""

    stage: int
    turn_cap: int


@dataclass(frozen=True, slots=True)
class EnvSpec:
    """How the agent talks to one env: action format and optional system prompt override."""

    action_format: ActionFormat = ActionFormat.REACT
    system_prompt: str | None = None
    invalid_penalty: float = 0.0
    """See `turn.episode_reward` (0: the reward is the env's score)."""
    reward_floor: float | None = None
    """See `turn.episode_reward` (None: the env's score as it is)."""
    turn_cost: float = 0.0
    """See `turn.episode_reward` (0: every success trains on its score)."""
    tools: ToolReader | None = None
    """With `action_format` TOOLS: the env's tools and how replies write a call."""
    history_turns: int | None = None
    """Turns each prompt keeps (`episode/context.py`; None: the whole history)."""
    shaping_on: ShapingOn = "each_turn"
    """Which turns carry the penalty and the cost (`turn.turn_shaped_rewards`)."""
    reward: RewardConfig = ENV_REWARD
    """Where the reward comes from (a judge's score: `EpisodeState.samples(judged=...)`)."""


@dataclass(frozen=True, slots=True)
class EpisodePlan:
    """What the dispatcher decided for one episode: the task and the version it runs under."""

    task: Task
    dispatch_version: int
    budget: TurnBudget
    request_id: str
