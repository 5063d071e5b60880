"""How an env's score becomes an episode's reward, and when an episode counts as a success.

Contract: env servers report their score as the reference servers do (`score` in every reply);
`reward_of(env, score)` is the training reward an episode's final score gives, and
`is_success(env, reward)` whether that reward is a success, for training metrics, episode logs,
held-out evaluation and `agentgym-rl eval` alike. Most envs score in [0, 1] and score above 0
only on success, so their reward is the score and success is `reward > 0`. An env with partial
credit declares otherwise (`score_scale`, `success_at`):

- SciWorld scores 0-100 with partial credit for finished subgoals (-100 for a failed task): the
  reward is score / 100 (so in [-1, 1]), and success is the task completed (score 100).

With a judge (`rollout.envs[].reward`), `judged_score` gives the score an episode's reward is
shaped from and the success its shaping follows: `judge`, the judged score in [0, 1] and success
at `success_at`; `env+judge`, the env's reward and the judge's score mixed by `judge_weight`,
and the env's success.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentgym_rl.env_discovery import env_traits

if TYPE_CHECKING:
    from agentgym_rl.config.rollout import RewardConfig


def reward_of(env: str, score: float) -> float:
    """The reward of an episode of `env` that ended with the env's `score`."""
    return score / env_traits(env).score_scale


def is_success(env: str, reward: float, env_failure: bool = False) -> bool:
    """Whether an episode of `env` with this reward succeeded (an env failure never does)."""
    if env_failure:
        return False
    at = env_traits(env).success_at
    return reward > 0.0 if at is None else reward >= at - 1e-9


def judged_score(env: str, reward: float, judged: float, rule: RewardConfig) -> tuple[float, bool]:
    """(score, success) of an episode of `env` whose env reward is `reward` and whose judge
    scored it `judged` (see the module docstring)."""
    if rule.source == "judge":
        return judged, judged >= rule.success_at - 1e-9
    w = rule.judge_weight
    return (1.0 - w) * reward + w * judged, is_success(env, reward)
