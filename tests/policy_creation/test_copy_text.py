"""Read-and-copy text: every chat asks for the first line's value and the one listed entry that
starts with it, draws from the words given and nothing else, and repeats by seed."""

from __future__ import annotations

import pytest

from agentgym_rl.policy_creation.copy_text import copy_transcripts, vocabulary_words

pytestmark = pytest.mark.unit

WORDS = [f"w{i}" for i in range(20)] + ["go to red ball", "purple key", "turn left"]


def test_each_chat_copies_the_first_value_and_its_listed_entry() -> None:
    chats = copy_transcripts(WORDS, 200, seed=3)
    assert len(chats) == 200 and chats == copy_transcripts(WORDS, 200, seed=3)
    values = set()
    for chat in chats:
        _, user, reply = (m["content"] for m in chat.messages)
        lines = user.splitlines()
        value = lines[0].split(": ", 1)[1]
        entries = lines[-1].split(": ", 1)[1].split(", ")
        thought, action = reply.splitlines()
        assert thought == f"Thought: {value}" and action.startswith(f"Action: {value} ")
        assert action.removeprefix("Action: ") in entries
        assert sum(e.rsplit(" ", 1)[0] == value for e in entries) == 1  # one entry is the value's
        assert 3 <= len(entries) <= 8 and value in WORDS
        assert all(e.rsplit(" ", 1)[0] in WORDS for e in entries)
        values.add(value)
    assert len(values) == len(WORDS)  # every word is read and copied


def test_too_few_words_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 8 distinct words"):
        copy_transcripts(["a", "b", "a"], 3)


def test_the_words_of_a_created_tokenizer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    from agentgym_rl.policy_creation import create_tiny_model

    corpus = ["go to red ball", "go to blue key", "turn left", "pick up red ball"] * 50
    model = create_tiny_model(tmp_path / "m", corpus=corpus, vocab_size=300, phrase_tokens=True)
    words = vocabulary_words(AutoTokenizer.from_pretrained(str(model)))
    assert "go to red ball" in words or "red ball" in words
    assert all(w == w.strip() and all(c.isalpha() or c == " " for c in w) for w in words)
