"""Wordle: find a hidden five-letter English word in a few guesses.

Words come from wordfreq's English list (shipped with the package, nothing downloaded): the
five-letter, lowercase ASCII words among its `VOCAB_TOP_N` most frequent are the valid guesses;
the first `NUM_TARGETS` of them by frequency are the targets, and task `data_idx` is
`targets[data_idx]` (ids `[0, NUM_TARGETS)`, deterministic for the pinned wordfreq version). The
category of a task is its frequency band, `band(data_idx)`: "common", "medium" or "rare" (thirds
of the targets by rank).

Reset states the rules and `Guess a five-letter word. You have 6 guesses.` An action is a word
(`crane`, or `guess crane`; case and surrounding quotes do not matter). Each guess is answered
with one mark per letter, e.g. `crane: c=absent r=present a=correct n=absent e=absent`, by
Wordle's rule for repeated letters (exact matches first, then a letter is `present` only as many
more times as the target has it), then the guesses left. Finding the word: reward 1, score 1,
done. The last guess used without finding it: done, score 0, and the word is revealed. A guess
that is not a five-letter word of the list is refused (`invalid`) and uses up no guess.

Option `guesses` (`--env-option guesses=N`, default 6) sets the number of guesses.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from functools import cache
from typing import Any, ClassVar

from agentgym_envs.server.base import REACT_RULES, Environment, EnvOption, Episode, StepResult
from agentgym_envs.server.tools import Param, Tool

VOCAB_TOP_N = 50_000  # wordfreq's most frequent words searched: ~5,600 five-letter ones
NUM_TARGETS = 2_000  # the most frequent five-letter words: ones an agent can know
BANDS = ("common", "medium", "rare")
RULES = (
    "Find the hidden five-letter English word. After each guess every letter is marked "
    "correct (right letter, right place), present (in the word, but elsewhere) or absent "
    "(not in the word, or no more copies of it than already marked)."
)
_ACTION = re.compile(r"^(?:guess\b\s*:?\s*)?(\S+)$")


@cache
def load_words() -> tuple[tuple[str, ...], frozenset[str]]:
    """(targets by descending frequency, every valid guess); one copy per process."""
    import wordfreq  # ~0.1 s: at first use, not when the env module is imported

    ranked = [
        w
        for w in wordfreq.top_n_list("en", VOCAB_TOP_N, wordlist="large")
        if len(w) == 5 and w.isascii() and w.isalpha() and w.islower()
    ]
    return tuple(ranked[:NUM_TARGETS]), frozenset(ranked)


def band(data_idx: int) -> str:
    """The frequency band of target `data_idx`: thirds of the targets by rank."""
    return BANDS[data_idx * len(BANDS) // NUM_TARGETS]


def feedback(guess: str, target: str) -> list[str]:
    """One mark per letter of `guess`: "correct", "present" or "absent" (Wordle's rules)."""
    marks = ["correct" if g == t else "absent" for g, t in zip(guess, target, strict=True)]
    # Letters of the target not matched exactly: each may mark one misplaced letter present.
    unmatched = Counter(t for t, m in zip(target, marks, strict=True) if m != "correct")
    for i, g in enumerate(guess):
        if marks[i] == "absent" and unmatched[g] > 0:
            marks[i] = "present"
            unmatched[g] -= 1
    return marks


def feedback_text(guess: str, target: str) -> str:
    """`crane: c=absent r=present a=correct n=absent e=absent`."""
    marks = feedback(guess, target)
    return f"{guess}: " + " ".join(f"{g}={m}" for g, m in zip(guess, marks, strict=True))


def parse_guess(action: str) -> str:
    """The guessed word of an action: `Crane`, `guess crane`, `"crane".` all give `crane`
    (anything else is returned as written, lowercased, to be refused)."""
    text = " ".join(action.strip().strip("\"'`").rstrip(".").lower().split())
    m = _ACTION.match(text)
    return m[1].strip("\"'`") if m else text


def _plural(n: int) -> str:
    return f"{n} guess" if n == 1 else f"{n} guesses"


class WordleEpisode(Episode):
    """The target and the guesses left of one game."""

    def __init__(self, targets: tuple[str, ...], valid: frozenset[str], guesses: int) -> None:
        self._targets = targets
        self._valid = valid
        self._words = tuple(sorted(valid))  # random_action's choices, in a fixed order
        self._guesses = guesses
        self._target = ""
        self._left = 0
        self._score = 0.0
        self._last = ""
        self._history: list[tuple[str, list[str]]] = []  # valid guesses and their marks

    @property
    def target(self) -> str:
        """The hidden word (for tests and scripted players)."""
        return self._target

    def reset(self, data_idx: int) -> StepResult:
        self._target = self._targets[data_idx]
        self._left = self._guesses
        self._history = []
        self._score = 0.0
        self._last = f"{RULES}\nGuess a five-letter word. You have {_plural(self._left)}."
        return StepResult(self._last)

    def step(self, action: str) -> StepResult:
        if self._done:
            return StepResult("The game is over.", 0.0, self._score, True, invalid=True)
        guess = parse_guess(action)
        refusal = self._refusal(guess)
        if refusal:
            text = f"{refusal} It did not count: you have {_plural(self._left)} left."
            return StepResult(text, 0.0, self._score, False, invalid=True)
        self._left -= 1
        self._history.append((guess, feedback(guess, self._target)))
        lines = [feedback_text(guess, self._target)]
        if guess == self._target:
            self._score = 1.0
            used = self._guesses - self._left
            lines.append(f"You found the word in {_plural(used)}.")
        elif self._left == 0:
            lines.append(f"No guesses left. The word was {self._target!r}.")
        else:
            lines.append(f"You have {_plural(self._left)} left.")
        self._last = "\n".join(lines)
        return StepResult(self._last, self._score, self._score, self._done)

    def observation(self) -> str:
        return self._last

    def available_actions(self) -> list[str]:
        return [] if self._done else ["<five-letter word>"]

    def rule_action(self, rng: random.Random) -> str | None:
        """A valid word that would have drawn the same marks as every guess so far, at random
        (the first guess: any word)."""
        if self._done:
            return None
        fits = [
            w for w in self._words if all(feedback(g, w) == marks for g, marks in self._history)
        ]
        return rng.choice(fits or self._words)

    def random_action(self, rng: random.Random) -> str | None:
        # Uniform over the valid words: a guess that is never refused, but knows no feedback.
        return None if self._done else rng.choice(self._words)

    @property
    def _done(self) -> bool:
        return self._score > 0 or self._left == 0

    def _refusal(self, guess: str) -> str:
        """Why `guess` is refused ("" when it is a valid guess)."""
        if len(guess) != 5 or not (guess.isascii() and guess.isalpha()):
            return f"{guess!r} is not a five-letter word."
        if guess not in self._valid:
            return f"{guess!r} is not in the word list."
        return ""


class WordleEnvironment(Environment):
    """Wordle over wordfreq's English words; task ids are `[0, NUM_TARGETS)`."""

    name: ClassVar[str] = "wordle"
    rule: ClassVar[str | None] = "a word consistent with every mark so far"
    description: ClassVar[str] = (
        "Wordle: find a five-letter English word in 6 guesses from per-letter feedback"
    )
    system_prompt: ClassVar[str | None] = (
        "You play Wordle: find the hidden five-letter English word. Your action is one guess, a "
        "five-letter English word (e.g. 'crane'). Each guess is answered with a mark per letter: "
        "correct (right letter, right place), present (in the word, but elsewhere) or absent (not "
        "in the word, or no more copies of it). Use every mark so far to choose the next guess. "
        + REACT_RULES
    )
    options: ClassVar[tuple[EnvOption, ...]] = (
        EnvOption("guesses", int, 6, help="guesses per game", minimum=1),
    )
    tools: ClassVar[tuple[Tool, ...]] = (
        Tool(
            "guess",
            "Guess a five-letter English word; each letter comes back marked correct, present "
            "or absent. A word not in the word list is refused and uses up no guess.",
            "{word}",  # the bare word: what the env's prompt asks for
            (Param("word", "string", "A five-letter English word, e.g. 'crane'."),),
        ),
    )
    splits: ClassVar[dict[str, str | range]] = {
        "train": "data/train.json",
        "test": "data/test.json",
    }

    def __init__(self, guesses: int | str = 6) -> None:
        # Parsed here too: a caller that builds the class directly passes strings as well.
        self.guesses: int = self.options[0].parse(self.name, guesses)
        self.targets, self.valid = load_words()

    def new_episode(self) -> WordleEpisode:
        return WordleEpisode(self.targets, self.valid, self.guesses)

    def num_tasks(self) -> int | None:
        return len(self.targets)

    def info(self) -> dict[str, Any]:
        return {**super().info(), "guesses": self.guesses, "valid_words": len(self.valid)}
