"""The turn rule (`episode/turn.py`) on its own: a fake env step, the ChatML fixture tokenizer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np
import pytest

from agentgym_rl import _core
from agentgym_rl.config import ActionFormat
from agentgym_rl.config.rollout import JudgeConfig, RewardConfig
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.outcome import judged_score
from agentgym_rl.episode.turn import EnvStepError, EpisodeState, act, play_turn
from agentgym_rl.episode.types import EnvSpec, EpisodePlan, Generation, TurnBudget
from agentgym_rl.trajectory import ChatTokenizer
from agentgym_rl.wire.types import Status


@dataclass(frozen=True)
class Outcome:
    observation: str
    score: float
    done: bool = False
    invalid: bool = False


class FakeEnv:
    """Answers each step from `script` (an exception is raised); records the actions."""

    def __init__(self, *script: Outcome | Exception) -> None:
        self.script = list(script)
        self.actions: list[str] = []

    async def step(self, action: str) -> Outcome:
        self.actions.append(action)
        out = self.script.pop(0)
        if isinstance(out, Exception):
            raise out
        return out


def episode(chat: ChatTokenizer, cap: int = 5, penalty: float = 0.0, max_len: int = 4096):
    plan = EpisodePlan(Task("noop_1", "noop", 1), 2, TurnBudget(0, cap), "e0")
    eos = int(chat.eos_token_id or 0)
    spec = EnvSpec(invalid_penalty=penalty)
    ep = EpisodeState.start(
        plan, spec, chat, "You are here.", max_len=max_len, stop_ids=[eos], check_drift=True
    )
    return ep, eos


def generation(chat: ChatTokenizer, text: str, eos: int, finish: str = "stop") -> Generation:
    ids = [int(i) for i in chat.encode(text)] + [eos]
    return Generation(ids, [-0.5] * len(ids), [2] * len(ids), finish)  # type: ignore[arg-type]


def turn(ep: EpisodeState, gen: Generation, env: FakeEnv, metrics: RolloutMetrics) -> None:
    asyncio.run(play_turn(ep, gen, env.step, metrics))


def test_turns_until_done_count_tokens_steps_and_invalid_turns(chat: ChatTokenizer) -> None:
    ep, eos = episode(chat)
    env = FakeEnv(Outcome("a wall", 0.0, invalid=True), Outcome("you won", 1.0, done=True))
    metrics = RolloutMetrics()
    texts = ("Thought: hm.\nAction: walk through wall", "no action here", "Action: stop.")
    for text in texts:
        assert ep.status is None and ep.request_id == f"e0-t{ep.turns}"
        turn(ep, generation(chat, text, eos), env, metrics)
    assert env.actions == ["walk through wall", "stop"]  # the unparseable turn is not sent
    assert (ep.status, ep.turns, ep.invalid, ep.score) == (Status.DONE, 3, 2, 1.0)
    assert (metrics.env_steps, metrics.invalid_actions) == (2, 2)
    assert metrics.generated_tokens == sum(len(chat.encode(t)) + 1 for t in texts)
    sample = ep.samples()[0]
    text = chat.decode(sample.input_ids.tolist())
    assert "Invalid action format: no line starting with 'Action:'" in text
    assert (sample.status, sample.reward, sample.turns) == ("done", 1.0, 3)
    assert (sample.turn_cap, sample.dispatch_version) == (5, 2)


def test_turn_cap_and_the_invalid_penalty(chat: ChatTokenizer) -> None:
    ep, eos = episode(chat, cap=2, penalty=0.5)
    env = FakeEnv(Outcome("nothing", 0.0, invalid=True), Outcome("nothing", 0.0))
    for _ in range(2):
        turn(ep, generation(chat, "Action: wait", eos), env, RolloutMetrics())
    assert (ep.status, ep.turns) == (Status.TURN_CAP, 2)
    sample = ep.samples()[0]
    assert sample.reward == -0.25  # -penalty * invalid / turns
    assert sample.loss_mask[-1] == 1  # no observation after the capped turn


def judged_episode(chat: ChatTokenizer, reward: RewardConfig, **spec: float) -> EpisodeState:
    """Three turns (a refused action, a wait, a win scoring 0.8), kept for a judge."""
    plan = EpisodePlan(Task("noop_1", "noop", 1), 2, TurnBudget(0, 4), "e0")
    eos = int(chat.eos_token_id or 0)
    ep = EpisodeState.start(
        plan,
        EnvSpec(reward=reward, **spec),  # type: ignore[arg-type]
        chat,
        "Reach the door.",
        max_len=4096,
        stop_ids=[eos],
        check_drift=True,
    )
    env = FakeEnv(
        Outcome("a wall", 0.0, invalid=True), Outcome("waited", 0.0), Outcome("won", 0.8, True)
    )
    for text in ("Action: walk through wall", "Action: wait", "Action: open door"):
        turn(ep, generation(chat, text, eos), env, RolloutMetrics())
    return ep


def test_a_judged_score_rescores_the_episode_and_shaping_follows_its_success(
    chat: ChatTokenizer,
) -> None:
    judge = JudgeConfig(model="j", url="http://judge/v1")
    ep = judged_episode(chat, RewardConfig(source="judge", judge=judge, success_at=0.5))
    assert ep.first_observation == "Reach the door."
    assert [reply for reply, _ in ep.exchanges] == [
        "Action: walk through wall",
        "Action: wait",
        "Action: open door",
    ]
    assert ep.exchanges[-1][1] == "won"
    (env_sample,) = ep.samples()
    assert env_sample.reward == pytest.approx(0.8)
    (judged,) = ep.samples(judged=0.6)  # asked again: the trajectory is kept
    assert judged.reward == pytest.approx(0.6)
    assert list(judged.turn_rewards) == pytest.approx([0.0, 0.0, 0.6])  # the judge's, at the end
    np.testing.assert_array_equal(judged.input_ids, env_sample.input_ids)

    # below `success_at` it failed: the invalid penalty replaces the judged score
    shaped = judged_episode(
        chat, RewardConfig(source="judge", judge=judge), invalid_penalty=0.3, turn_cost=0.5
    )
    (low,) = shaped.samples(judged=0.4)
    assert low.reward == pytest.approx(-0.3 / 3)
    assert list(low.turn_rewards) == pytest.approx([-0.1, 0.0, 0.0])  # on the refused turn
    # at or above it succeeded: the turn cost applies to the judged score
    (high,) = shaped.samples(judged=1.0)
    assert high.reward == pytest.approx(1.0 * (1 - 0.5 * 3 / 4))
    assert sum(high.turn_rewards) == pytest.approx(high.reward)


def test_env_plus_judge_mixes_the_scores_and_keeps_the_envs_turn_rewards(
    chat: ChatTokenizer,
) -> None:
    rule = RewardConfig(
        source="env+judge", judge=JudgeConfig(model="j", url="http://j/v1"), judge_weight=0.25
    )
    ep = judged_episode(chat, rule)
    (sample,) = ep.samples(judged=0.0)
    assert sample.reward == pytest.approx(0.75 * 0.8)
    assert list(sample.turn_rewards) == pytest.approx([0.0, 0.0, 0.6])
    assert judged_score("noop", 0.8, 0.0, rule) == (pytest.approx(0.6), True)  # the env's success
    judge_only = rule.model_copy(update={"source": "judge"})
    assert judged_score("noop", 0.8, 0.49, judge_only) == (0.49, False)
    assert judged_score("noop", 0.0, 0.5, judge_only) == (0.5, True)


@pytest.mark.parametrize("error", [EnvStepError("HTTP 500"), _core.EnvFailureError("gone")])
def test_a_failed_step_is_an_env_failure_with_why(chat: ChatTokenizer, error: Exception) -> None:
    ep, eos = episode(chat, penalty=0.5)
    metrics = RolloutMetrics()
    turn(ep, generation(chat, "Action: go", eos), FakeEnv(error), metrics)
    assert (ep.status, ep.failure) == (Status.ENV_FAILURE, f"step: {error}")
    assert metrics.env_steps == 0 and ep.samples()[0].reward == 0.0  # no penalty: not the policy's


def test_abort_and_context_limit(chat: ChatTokenizer) -> None:
    ep, eos = episode(chat)
    turn(ep, generation(chat, "Action: go", eos, finish="abort"), FakeEnv(), RolloutMetrics())
    assert ep.status is Status.ABORTED
    prefix = len(episode(chat)[0].context.ids)
    ep, eos = episode(chat, max_len=prefix + 40)
    env = FakeEnv(*[Outcome("x " * 20, 0.0)] * 10)
    while ep.status is None and (room := ep.room(64)) > 0:
        turn(ep, generation(chat, "Action: go " + "go " * 10, eos), env, RolloutMetrics())
        assert room <= 64
    sample = ep.samples()[0]
    assert ep.status is Status.TRUNCATED and ep.turns >= 1
    assert len(sample.input_ids) <= prefix + 40 and sample.loss_mask[-1] == 1


def test_act_parses_in_the_env_format() -> None:
    env = FakeEnv(Outcome("results", 0.0))
    acted = asyncio.run(act(env.step, "<search> who  won </search>", ActionFormat.TAGS, 0.5))
    assert env.actions == ["<search>who won</search>"]
    assert (acted.observation, acted.stepped, acted.ended, acted.invalid) == (
        "results",
        True,
        None,
        False,
    )
    feedback = asyncio.run(act(env.step, "Action: search", ActionFormat.TAGS, 0.5))
    assert feedback.invalid and not feedback.stepped and feedback.score == 0.5
    assert feedback.observation.startswith("Invalid action format")
