"""Loading a SearchQA corpus and question set from user files (or the shipped defaults).

Contract: `load_corpus(path)` reads wiki-18 JSONL, one `{"id": ..., "contents": "\"Title\"\ntext"}`
per line (`id` optional), and `load_questions(path)` Search-R1 questions, JSONL or a JSON list,
each `{"question": str, "golden_answers": [str, ...] or str}` with optional `data_source`
(or `source`), `hops` and `category`. Any problem raises ValueError naming the file and line
(1-based; for a JSON list, the item number), so a bad file fails at env construction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Doc:
    id: str
    title: str  # the first line of `contents`, as the reference shows it (quotes kept)
    text: str  # the rest

    @property
    def contents(self) -> str:
        return f"{self.title}\n{self.text}"


@dataclass(frozen=True, slots=True)
class QA:
    question: str
    golden_answers: tuple[str, ...]
    category: str
    source: str


def _rows(path: Path, *, allow_list: bool) -> Iterator[tuple[int, Any]]:
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from exc
    if allow_list and raw.lstrip().startswith("["):
        try:
            items = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"{path}: not valid JSON: {exc}") from exc
        yield from enumerate(items, 1)
        return
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path} line {n}: not valid JSON: {exc}") from exc


def load_corpus(path: Path) -> list[Doc]:
    docs: list[Doc] = []
    for n, row in _rows(path, allow_list=False):
        contents = row.get("contents") if isinstance(row, dict) else None
        if not isinstance(contents, str) or not contents.strip():
            raise ValueError(f"{path} line {n}: expected an object with a non-empty 'contents'")
        title, _, text = contents.partition("\n")
        docs.append(Doc(str(row.get("id", len(docs))), title.strip(), text.strip()))
    if not docs:
        raise ValueError(f"{path}: the corpus is empty")
    return docs


def load_questions(path: Path) -> list[QA]:
    out: list[QA] = []
    for n, row in _rows(path, allow_list=True):
        where = f"{path} line {n}"
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected an object, got {type(row).__name__}")
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"{where}: missing or empty 'question'")
        golden = row.get("golden_answers")
        if isinstance(golden, str):
            golden = [golden]
        if (
            not isinstance(golden, list)
            or not golden
            or not all(isinstance(g, str) and g.strip() for g in golden)
        ):
            raise ValueError(f"{where}: 'golden_answers' must be a non-empty list of strings")
        source = str(row.get("data_source") or row.get("source") or "")
        hops = row.get("hops")
        category = row.get("category") or (f"{hops}-hop" if hops else source) or "default"
        out.append(QA(question.strip(), tuple(golden), str(category), source))
    if not out:
        raise ValueError(f"{path}: no questions")
    return out
