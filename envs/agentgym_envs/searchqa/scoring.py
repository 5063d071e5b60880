"""Reading a SearchQA action and scoring an answer.

Contract: `parse_action(text)` finds the first complete `<search>...</search>` or
`<answer>...</answer>` (tag names case-insensitive, content whitespace-collapsed) and returns
`(tag, content)`, or None when there is none or its content is empty. `exact_match` is the
Search-R1 / AgentGym rule: both sides normalised (lowercase, punctuation removed, articles
a/an/the removed, whitespace collapsed), correct when equal to any golden answer.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

_TAG = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def parse_action(text: str) -> tuple[str, str] | None:
    """`("search", query)` or `("answer", text)` from the first tag in `text`, else None."""
    match = _TAG.search(text)
    if match is None:
        return None
    content = " ".join(match.group(2).split())
    return (match.group(1).lower(), content) if content else None


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation, drop articles, collapse whitespace (in that order, as the
    reference does: "The-Guild" -> "theguild" keeps its article glued)."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golden: Iterable[str]) -> bool:
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(g) for g in golden)
