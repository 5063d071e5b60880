"""What a judge reads and how its replies are read: prompts filled from transcripts, scores
parsed (reasoning first is fine; anything unreadable raises), and the guided-decoding formats
accept exactly what the parsers read."""

from __future__ import annotations

import re

import pytest

from agentgym_rl.judging.rubric import (
    MESSAGE_CHARS,
    JudgeReplyError,
    Transcript,
    episode_prompt,
    group_prompt,
    group_regex,
    parse_score,
    parse_scores,
    score_regex,
)

T = Transcript("Goal: go to the red ball.", (("Action: go forward", "You completed the goal."),))


def test_an_episode_prompt_holds_the_task_the_turns_and_the_reference() -> None:
    prompt = episode_prompt(None, T, reference="the red ball")
    assert "Goal: go to the red ball." in prompt
    assert "Turn 1, the agent: Action: go forward" in prompt
    assert "Turn 1, the environment: You completed the goal." in prompt
    assert "A reference answer: the red ball" in prompt and "SCORE: x" in prompt
    assert "reference answer" not in episode_prompt(None, T)


def test_a_users_rubric_is_filled_and_long_messages_are_clipped() -> None:
    long = Transcript("x" * 5000, (("a" * 10, "b" * 4000),))
    prompt = episode_prompt("TASK={task}|T={transcript}|R={reference}", long)
    assert prompt.startswith("TASK=") and "[...]" in prompt
    assert len(prompt) < 2 * MESSAGE_CHARS + 200
    assert "(the episode ended before the agent acted)" in episode_prompt(
        None, Transcript("task", ())
    )


def test_a_group_prompt_numbers_the_attempts() -> None:
    other = Transcript(T.task, (("Action: turn left", "You ran out of steps."),))
    prompt = group_prompt(None, [T, other])
    assert prompt.index("Attempt 1:") < prompt.index("Attempt 2:")
    assert "2 attempts" in prompt and "`k: x`" in prompt
    with pytest.raises(ValueError):
        group_prompt(None, [])


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("SCORE: 1", 1.0),
        ("The agent reached it.\nSCORE: 0.75", 0.75),
        ("score: 0", 0.0),
        ("**SCORE:** 0.5", 0.5),
        ("SCORE: 0.2 ... on reflection SCORE: .9", 0.9),
    ],
)
def test_a_score_is_read_from_the_last_score_line(reply: str, score: float) -> None:
    assert parse_score(reply) == score


@pytest.mark.parametrize("reply", ["I think it did well", "SCORE: 1.5", "SCORE: -0.1", ""])
def test_an_unreadable_or_out_of_range_score_raises(reply: str) -> None:
    with pytest.raises(JudgeReplyError):
        parse_score(reply)


def test_group_scores_one_per_attempt_in_order() -> None:
    assert parse_scores("Thinking...\n2: 0.5\n1: 1\n3: 0", 3) == [1.0, 0.5, 0.0]
    assert parse_scores("Attempt 1: 0.25\nAttempt 2 = 1.0", 2) == [0.25, 1.0]
    for bad in ("1: 1\n3: 0", "1: 1\n1: 0\n2: 1", "1: 1\n2: 2", "1: 1\n2: 1\n9: 0"):
        with pytest.raises(JudgeReplyError):
            parse_scores(bad, 2 if bad.count("\n") < 2 else 3)


def test_the_guided_formats_accept_what_the_parsers_read() -> None:
    for text in ("SCORE: 0", "SCORE: 1", "SCORE: 0.375", "SCORE: 1.0"):
        assert re.fullmatch(score_regex(), text)
        assert 0.0 <= parse_score(text) <= 1.0
    for text in ("SCORE: 2", "SCORE: 1.5", "SCORE: -1"):
        assert not re.fullmatch(score_regex(), text)
    reply = "1: 0.5\n2: 1\n3: 0"
    assert re.fullmatch(group_regex(3), reply) and parse_scores(reply, 3) == [0.5, 1.0, 0.0]
    assert not re.fullmatch(group_regex(3), "1: 0.5\n2: 1")
