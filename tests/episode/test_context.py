"""Step-wise context (`episode/context.py`) through the turn rule: each turn's prompt is the
template's rendering of the prefix and the last k turns, each turn trains as its own sample with
exactly the sampled ids, and the samples carry the episode's reward, status and turns."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from tests.episode.test_turn import FakeEnv, Outcome

from agentgym_rl.episode.context import part_id, recent
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.prompts import episode_prefix
from agentgym_rl.episode.turn import EpisodeState, play_turn
from agentgym_rl.episode.types import EnvSpec, EpisodePlan, Generation, TurnBudget
from agentgym_rl.trajectory import ChatTokenizer
from agentgym_rl.wire.types import Status

FIRST = "You are in room 0."
TEXTS = [f"Thought: step {i}.\nAction: go {i}" for i in range(5)]
OBS = [Outcome(f"You are in room {i + 1}.", 0.25 * (i >= 2)) for i in range(4)]
OBS.append(Outcome("You won.", 1.0, done=True))


def play(chat: ChatTokenizer, history_turns: int | None, cap: int = 10) -> EpisodeState:
    plan = EpisodePlan(Task("noop_1", "noop", 1), 3, TurnBudget(1, cap), "g7-e1")
    eos = int(chat.eos_token_id or 0)
    ep = EpisodeState.start(
        plan,
        EnvSpec(history_turns=history_turns),
        chat,
        FIRST,
        max_len=4096,
        stop_ids=[eos],
        check_drift=True,
    )
    env = FakeEnv(*OBS)
    for text in TEXTS:
        if ep.status is not None:
            break
        ids = [int(i) for i in chat.encode(text)] + [eos]
        gen = Generation(ids, [-0.5] * len(ids), [3] * len(ids), "stop")
        asyncio.run(play_turn(ep, gen, env.step, RolloutMetrics()))
    return ep


def window_messages(k: int, turn: int) -> list[dict[str, str]]:
    """What turn `turn` (0-based) should read with a window of k turns."""
    messages = episode_prefix("noop", FIRST, EnvSpec().action_format)
    for t in range(max(0, turn - k), turn):
        messages += [
            {"role": "assistant", "content": TEXTS[t]},
            {"role": "user", "content": OBS[t].observation},
        ]
    return messages


@pytest.mark.parametrize("k", [1, 2, 4])
def test_each_turn_is_a_sample_of_its_window_then_exactly_the_sampled_ids(
    chat: ChatTokenizer, k: int
) -> None:
    ep = play(chat, k)
    assert (ep.status, ep.turns) == (Status.DONE, 5)
    samples = ep.samples()
    assert len(samples) == 5
    eos = int(chat.eos_token_id or 0)
    for t, s in enumerate(samples):
        prompt = chat.apply_chat_template(window_messages(k, t), add_generation_prompt=True)
        sampled = [int(i) for i in chat.encode(TEXTS[t])] + [eos]
        ids, mask = s.input_ids.tolist(), s.loss_mask.tolist()
        assert ids == prompt.tolist() + sampled  # the template's prompt, then the turn verbatim
        assert mask == [0] * len(prompt) + [1] * len(sampled)
        assert s.turn_spans.tolist() == [len(prompt), len(ids)]
        assert np.allclose(s.logprobs[len(prompt) :], -0.5) and not s.logprobs[: len(prompt)].any()
        assert s.request_id == part_id("g7-e1", t) == ("g7-e1" if t == 0 else f"g7-e1/s{t}")
        # the episode's reward, status and turns on every part; each part its own turn's reward
        assert (s.reward, s.status, s.turns, s.turn_cap, s.stage) == (1.0, "done", 5, 10, 1)
        assert s.turn_rewards.tolist() == [[0.0, 0.0, 0.25, 0.0, 0.75][t]]
        assert len(s.turn_keys) == 1 and not s.drift
    # each turn acted from its own state
    assert len({int(s.turn_keys[0]) for s in samples}) == 5


def test_the_window_bounds_the_prompt_and_full_history_keeps_one_sample(
    chat: ChatTokenizer,
) -> None:
    full, windowed = play(chat, None).samples(), play(chat, 1).samples()
    assert len(full) == 1 and full[0].request_id == "g7-e1" and full[0].turns == 5
    # the same sampled ids trained either way, the same per-turn rewards and keys
    assert sum(int(s.loss_mask.sum()) for s in windowed) == int(full[0].loss_mask.sum())
    assert [float(s.turn_rewards[0]) for s in windowed] == full[0].turn_rewards.tolist()
    assert [int(s.turn_keys[0]) for s in windowed] == full[0].turn_keys.tolist()
    lengths = [len(s.input_ids) for s in windowed]
    assert max(lengths) < len(full[0].input_ids)
    assert max(lengths[1:]) - min(lengths[1:]) <= 4  # one turn read back, whatever the turn


def test_an_episode_with_no_finished_turn_is_its_prompt_alone(chat: ChatTokenizer) -> None:
    plan = EpisodePlan(Task("noop_1", "noop", 1), 0, TurnBudget(0, 4), "g1-e0")
    ep = EpisodeState.start(
        plan, EnvSpec(history_turns=2), chat, FIRST, max_len=4096, stop_ids=[0], check_drift=True
    )
    gen = Generation([5], [-0.1], [0], "abort")
    asyncio.run(play_turn(ep, gen, FakeEnv().step, RolloutMetrics()))
    (sample,) = ep.samples()
    assert sample.status == Status.ABORTED.value and not sample.loss_mask.any()
    assert len(sample.turn_rewards) == 0


def test_recent_keeps_the_prefix_and_the_last_turns() -> None:
    messages = ["sys", "first", "a0", "o0", "a1", "t1a", "t1b", "a2", "o2"]
    starts = [2, 4, 7]
    assert recent(messages, starts, None) == messages
    assert recent(messages, starts, 3) == messages
    assert recent(messages, starts, 2) == ["sys", "first", "a1", "t1a", "t1b", "a2", "o2"]
    assert recent(messages, starts, 1) == ["sys", "first", "a2", "o2"]
