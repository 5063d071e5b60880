"""Wordle in-process: the id -> word mapping is fixed, feedback follows Wordle's rules for repeated
letters, a game is won by guessing the word and lost after the last guess, refused guesses use
up nothing, the splits are disjoint and banded, options are checked."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from agentgym_envs.server.base import REACT_RULES, EnvError, ErrorCode
from agentgym_envs.wordle.env import (
    BANDS,
    NUM_TARGETS,
    WordleEnvironment,
    WordleEpisode,
    band,
    feedback,
    load_words,
    parse_guess,
)
from agentgym_envs.wordle.make_splits import TEST_EVERY

pytestmark = pytest.mark.unit

C, P, A = "correct", "present", "absent"


@pytest.fixture(scope="module")
def env() -> WordleEnvironment:
    return WordleEnvironment()


def _wrong_guesses(env: WordleEnvironment, target: str, n: int) -> list[str]:
    """`n` valid guesses other than `target`."""
    return [w for w in sorted(env.valid) if w != target][:n]


def test_task_ids_name_fixed_words(env: WordleEnvironment) -> None:
    # Pinned for wordfreq 3.1.1: the split files and any recorded run name these words.
    targets = env.targets
    assert (targets[0], targets[1], targets[2]) == ("about", "their", "there")
    assert len(targets) == NUM_TARGETS == env.num_tasks()
    assert len(set(targets)) == len(targets) and set(targets) <= env.valid
    assert all(len(w) == 5 and w.isascii() and w.isalpha() and w.islower() for w in env.valid)
    assert 2_000 < len(env.valid) < 10_000
    other = WordleEnvironment().new_episode()
    for i in (0, 17, 999, NUM_TARGETS - 1):
        episode = env.new_episode()
        assert episode.reset(i) == other.reset(i)
        assert episode.target == other.target == targets[i]


@pytest.mark.parametrize(
    ("guess", "target", "marks"),
    [
        ("paper", "apple", [P, P, C, P, A]),  # the second p is exact, the first only present
        ("speed", "abide", [A, A, P, A, P]),  # one e in the target: only the first e is marked
        ("eerie", "there", [P, A, P, A, C]),  # exact matches are counted first
        ("llama", "hello", [P, P, A, A, A]),
        ("bobby", "abbey", [P, A, C, A, C]),  # the only unmatched b goes to the first b
        ("crane", "crane", [C] * 5),
    ],
)
def test_feedback_of_repeated_letters(guess: str, target: str, marks: list[str]) -> None:
    assert feedback(guess, target) == marks


def test_feedback_counts_each_letter_as_often_as_the_target_has_it(env: WordleEnvironment) -> None:
    rng = random.Random(0)
    words = sorted(env.valid)
    for _ in range(2_000):
        guess, target = rng.choice(words), rng.choice(env.targets)
        marks = feedback(guess, target)
        for i, (g, t) in enumerate(zip(guess, target, strict=True)):
            assert (marks[i] == C) == (g == t)
        marked = Counter(g for g, m in zip(guess, marks, strict=True) if m != A)
        for letter, k in Counter(guess).items():
            assert marked[letter] == min(k, target.count(letter)), (guess, target)


def test_guessing_the_word_after_a_wrong_guess_wins(env: WordleEnvironment) -> None:
    episode = env.new_episode()
    first = episode.reset(5)
    assert "Guess a five-letter word. You have 6 guesses." in first.observation
    target = episode.target
    wrong = _wrong_guesses(env, target, 1)[0]
    miss = episode.step(wrong)
    assert (miss.reward, miss.score, miss.done, miss.invalid) == (0.0, 0.0, False, False)
    assert miss.observation.startswith(f"{wrong}: {wrong[0]}=")
    assert "You have 5 guesses left." in miss.observation
    win = episode.step(f"Guess {target.upper()}")
    assert (win.reward, win.score, win.done, win.invalid) == (1.0, 1.0, True, False)
    assert "found the word in 2 guesses" in win.observation
    assert episode.available_actions() == [] and episode.random_action(random.Random(0)) is None


def test_six_wrong_guesses_lose_and_reveal_the_word(env: WordleEnvironment) -> None:
    episode = env.new_episode()
    episode.reset(1234)
    target = episode.target
    results = [episode.step(w) for w in _wrong_guesses(env, target, 6)]
    assert [r.done for r in results] == [False] * 5 + [True]
    assert all(r.reward == 0 and r.score == 0 and not r.invalid for r in results)
    assert f"The word was {target!r}" in results[-1].observation
    assert "You have 1 guess left." in results[-2].observation


def test_refused_guesses_are_invalid_and_use_up_nothing(env: WordleEnvironment) -> None:
    episode = env.new_episode()
    episode.reset(3)
    bad = ["abc", "abcdef", "12345", "cr4ne", "", "crane slate", "zzzzz"]
    assert "zzzzz" not in env.valid
    for action in bad:
        r = episode.step(action)
        assert r.invalid and r.reward == 0 and not r.done, action
        assert "did not count: you have 6 guesses left" in r.observation
    assert "not in the word list" in episode.step("zzzzz").observation
    assert "not a five-letter word" in episode.step("abc").observation
    # Still six guesses: the sixth valid wrong guess, not an earlier one, ends the game.
    results = [episode.step(w) for w in _wrong_guesses(env, episode.target, 6)]
    assert [r.done for r in results] == [False] * 5 + [True]


@pytest.mark.parametrize(
    ("action", "word"),
    [
        ("crane", "crane"),
        ("  Crane. ", "crane"),
        ("guess crane", "crane"),
        ("Guess: 'CRANE'", "crane"),
        ('"crane"', "crane"),
        ("guess", "guess"),  # a word of its own, not an empty `guess` command
        ("crane slate", "crane slate"),
    ],
)
def test_guess_parsing(action: str, word: str) -> None:
    assert parse_guess(action) == word


def test_random_actions_are_valid_guesses(env: WordleEnvironment) -> None:
    rng = random.Random(1)
    episode: WordleEpisode = env.new_episode()
    for data_idx in range(20):
        episode.reset(data_idx)
        assert episode.available_actions() == ["<five-letter word>"]
        done = False
        while not done:
            action = episode.random_action(rng)
            assert action is not None and action in env.valid
            result = episode.step(action)
            assert not result.invalid
            done = result.done


def test_splits_are_disjoint_banded_and_cover_every_target() -> None:
    train, test = WordleEnvironment.tasks("train"), WordleEnvironment.tasks("test")
    ids = {}
    for name, rows in (("train", train), ("test", test)):
        assert all(set(r) == {"item_id", "category"} for r in rows)
        assert all(r["item_id"].startswith("wordle_") for r in rows)
        ids[name] = [int(r["item_id"].removeprefix("wordle_")) for r in rows]
        assert len(set(ids[name])) == len(rows)
        assert all(r["category"] == band(i) for r, i in zip(rows, ids[name], strict=True))
        assert {r["category"] for r in rows} == set(BANDS)
    assert not set(ids["train"]) & set(ids["test"])
    assert sorted(ids["train"] + ids["test"]) == list(range(NUM_TARGETS))
    assert ids["test"] == list(range(0, NUM_TARGETS, TEST_EVERY))
    bands = Counter(band(i) for i in range(NUM_TARGETS))
    assert bands == {"common": 667, "medium": 667, "rare": 666}
    with pytest.raises(KeyError, match="no split 'dev'"):
        WordleEnvironment.tasks("dev")


def test_task_ids_out_of_range_are_refused(env: WordleEnvironment) -> None:
    env.check_data_idx(0)
    env.check_data_idx(NUM_TARGETS - 1)
    for bad in (-1, NUM_TARGETS):
        with pytest.raises(EnvError) as caught:
            env.check_data_idx(bad)
        assert caught.value.code is ErrorCode.BAD_DATA_IDX


def test_guesses_option() -> None:
    (option,) = WordleEnvironment.options
    assert option.name == "guesses" and option.parse("wordle", "3") == 3
    for bad, message in (("0", "must be >= 1"), ("x", "expected int"), ("2.5", "expected int")):
        with pytest.raises(ValueError, match=f"wordle option guesses='{bad}': {message}"):
            option.parse("wordle", bad)
    with pytest.raises(ValueError, match="must be >= 1"):
        WordleEnvironment(guesses="0")
    short = WordleEnvironment(guesses="2")
    episode = short.new_episode()
    assert "You have 2 guesses." in episode.reset(0).observation
    results = [episode.step(w) for w in _wrong_guesses(short, episode.target, 2)]
    assert [r.done for r in results] == [False, True]
    assert short.info()["guesses"] == 2


def test_declarations() -> None:
    assert WordleEnvironment.name == "wordle" and WordleEnvironment.action_format == "react"
    assert WordleEnvironment.description and "\n" not in WordleEnvironment.description
    assert WordleEnvironment.system_prompt is not None
    assert WordleEnvironment.system_prompt.endswith(REACT_RULES)
    assert WordleEnvironment.split_names() == ["train", "test"]
    assert load_words() is load_words()  # one word list per process
