"""Long text cut to its head and tail: what a judge reads of a message and what an episode log
keeps of the env's last answer. The middle goes first because an observation's head says what
it is and its tail how it ended."""

from __future__ import annotations


def clip_middle(text: str, limit: int) -> str:
    """`text` stripped; when longer than `limit`, its first and last `limit // 2` characters
    around ` [...] `."""
    text = text.strip()
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} [...] {text[-half:]}"
