"""Generic read-and-copy text: an env-agnostic pre-training stage for a created policy.

Contract: `copy_transcripts(words, count, seed=...)` returns `count` short chats, each a
`Transcript` the format warm-up trains on (`warmup.format_warmup`): a system turn that asks for a
`Thought:` line restating the first line's value and an `Action:` line copying the listed entry
that starts with it; a user turn of a few `<key>: <value>` lines and a last line listing 3-8
entries (`<word> <number>`), the value's entry among them; and the assistant turn that does it.
Keys, values and entries are drawn uniformly from `words` (the created tokenizer's own words and
phrases), so every token of the vocabulary is read and copied equally often, however rare it is
in an env's text.

Why it exists (docs/results/reading-the-goal): a 2M-parameter model warmed up only on an env's
random-action transcripts learns the goal's prior rather than to copy it (BabyAI's varied
GoToLocal goals: its thought names the goal in 10% of first turns), and RL then learns priors.
What it teaches is reading: find a line by position, copy its value, find that value in a list.
What it does not teach is any env's solution: no env text, no env action, nothing about when to
act on the value or what to do when it is not listed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from agentgym_rl.policy_creation.transcripts import Transcript

SYSTEM = (
    "Read the text. Reply with a line 'Thought: <the value of its first line>', then one line "
    "'Action: <the listed entry that starts with that value>'."
)


def copy_transcripts(words: Sequence[str], count: int, *, seed: int = 0) -> list[Transcript]:
    """`count` read-and-copy chats over `words` (at least 8 distinct; see the module docstring)."""
    pool = sorted(set(words))
    if len(pool) < 8:
        raise ValueError(f"read-and-copy text needs at least 8 distinct words, got {len(pool)}")
    rng = random.Random(seed)
    return [_one(pool, rng, i) for i in range(count)]


def _one(pool: list[str], rng: random.Random, index: int) -> Transcript:
    keys = rng.sample(pool, rng.randint(2, 4))
    value = rng.choice(pool)
    others = rng.sample([w for w in pool if w != value], rng.randint(2, 7))
    entries = [f"{w} {rng.randint(1, 3)}" for w in others]
    target = f"{value} {rng.randint(1, 3)}"
    entries.insert(rng.randrange(len(entries) + 1), target)
    lines = [f"{keys[0].capitalize()}: {value}"]
    lines += [f"{k.capitalize()}: {' '.join(rng.sample(pool, 2))}" for k in keys[1:-1]]
    lines.append(f"{keys[-1].capitalize()}: {', '.join(entries)}")
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "\n".join(lines)},
        {"role": "assistant", "content": f"Thought: {value}\nAction: {target}"},
    ]
    return Transcript(f"copy_{index}", messages, success=True)


def vocabulary_words(tokenizer: object) -> list[str]:
    """The words and phrases of a created tokenizer: each token that decodes to letters and
    spaces only, stripped (its phrase tokens, e.g. 'go to red ball', included)."""
    vocab = tokenizer.get_vocab()  # type: ignore[attr-defined]
    words = set()
    for token_id in vocab.values():
        text = tokenizer.decode([token_id]).strip()  # type: ignore[attr-defined]
        if len(text) >= 2 and all(c.isalpha() or c == " " for c in text):
            words.add(text)
    return sorted(words)


__all__ = ["SYSTEM", "copy_transcripts", "vocabulary_words"]
