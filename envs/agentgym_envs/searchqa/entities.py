"""The entities a passage mentions, and random actions built from a question and its search results.

Contract: `EntityIndex(titles)` knows every passage title as an entity name (quotes dropped);
`mentions(text)` lists the names that occur in `text` as whole words, longest match first at
each position, in order of first occurrence. `random_search(question, rng)` is a query of a run
of 1-6 of the question's words; `random_answer(entities, rng)` one of the entities seen.
These are what `init-model`'s format transcripts play: the right query or answer is among them
(so chance is above zero), and nothing here knows which one it is.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable

_WORD = re.compile(r"[\w'-]+")
_MAX_NAME_WORDS = 6


class EntityIndex:
    """Entity names by their words, for matching in passages."""

    def __init__(self, titles: Iterable[str]) -> None:
        self._names: dict[tuple[str, ...], str] = {}
        for title in titles:
            name = title.strip().strip('"').strip()
            words = tuple(_WORD.findall(name))
            if name and 0 < len(words) <= _MAX_NAME_WORDS:
                self._names.setdefault(words, name)
        self._longest = max((len(w) for w in self._names), default=0)

    def __len__(self) -> int:
        return len(self._names)

    def mentions(self, text: str) -> list[str]:
        words = _WORD.findall(text)
        found: dict[str, None] = {}
        i = 0
        while i < len(words):
            for n in range(min(self._longest, len(words) - i), 0, -1):
                name = self._names.get(tuple(words[i : i + n]))
                if name is not None:
                    found.setdefault(name)
                    i += n
                    break
            else:
                i += 1
        return list(found)


def random_search(question: str, rng: random.Random) -> str:
    """A run of 1-6 consecutive words of the question (a run keeps a name's words together, so
    the query copies text as it stands, as an answer copies an entity from a passage)."""
    words = _WORD.findall(question) or ["?"]
    k = rng.randint(1, min(6, len(words)))
    start = rng.randrange(len(words) - k + 1)
    return "<search> " + " ".join(words[start : start + k]) + " </search>"


def random_answer(entities: list[str], rng: random.Random) -> str:
    return f"<answer> {rng.choice(entities)} </answer>"


__all__ = ["EntityIndex", "random_answer", "random_search"]
