"""SearchQA retrievers in-process: both put the passage that answers a direct (1-hop) lookup
first, batched and single searches agree, and a second build loads the index from the cache."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import msgpack
import pytest

from agentgym_envs.searchqa.datafiles import load_corpus
from agentgym_envs.searchqa.env import DATA, SearchQAEnvironment
from agentgym_envs.searchqa.retrieval import build_retriever, cache_key
from agentgym_envs.server.table import EpisodeTable
from agentgym_envs.server.zmq_server import handle_payload

QUESTIONS = [json.loads(line) for line in (DATA / "questions.jsonl").read_text().splitlines()]
ONE_HOP = [q for q in QUESTIONS if q["hops"] == 1]
TEXTS = [d.contents for d in load_corpus(DATA / "corpus.jsonl")]


def _answered_first(texts: list[str], hits: list[list[int]], questions: list[dict]) -> float:
    """Share of questions whose first passage states the golden answer."""
    ok = sum(q["golden_answers"][0] in texts[h[0]] for q, h in zip(questions, hits, strict=True))
    return ok / len(questions)


def test_bm25_ranks_the_answering_passage_first_for_every_1hop_question(tmp_path: Path) -> None:
    retriever = build_retriever("bm25", TEXTS, tmp_path)
    hits = retriever.search_many([q["question"] for q in ONE_HOP], 3)
    assert _answered_first(TEXTS, hits, ONE_HOP) == 1.0
    assert all(len(h) == 3 for h in hits)
    sample = ONE_HOP[:20]
    assert [retriever.search(q["question"], 3) for q in sample] == hits[:20]


def test_bm25_index_is_cached_and_keyed_by_the_corpus(tmp_path: Path) -> None:
    cold = build_retriever("bm25", TEXTS, tmp_path)
    warm = build_retriever("bm25", TEXTS, tmp_path)
    assert (cold.from_cache, warm.from_cache) == (False, True)
    queries = [q["question"] for q in ONE_HOP[:50]]
    assert warm.search_many(queries, 5) == cold.search_many(queries, 5)
    assert cache_key("bm25", TEXTS) != cache_key("bm25", TEXTS[:-1])
    assert cache_key("bm25", TEXTS) != cache_key("dense", TEXTS)
    assert sorted(p.name.split("-")[0] for p in tmp_path.iterdir()) == ["bm25"]  # no temp left


@pytest.fixture(scope="module")
def dense_subset() -> tuple[list[str], list[dict]]:
    """40 1-hop questions and a 300-passage corpus holding their answers (encoding the whole
    corpus takes 30-100 s on 2 cores: that is the slow test below)."""
    rng = random.Random(7)
    questions = rng.sample(ONE_HOP, 40)
    keep = {i for i, t in enumerate(TEXTS) if any(q["golden_answers"][0] in t for q in questions)}
    keep |= set(rng.sample(range(len(TEXTS)), 300 - len(keep)))
    return [TEXTS[i] for i in sorted(keep)], questions


def test_dense_ranks_the_answer_first_and_caches(
    dense_subset: tuple[list[str], list[dict]], tmp_path: Path
) -> None:
    texts, questions = dense_subset
    start = time.perf_counter()
    cold = build_retriever("dense", texts, tmp_path)
    cold_s = time.perf_counter() - start
    hits = cold.search_many([q["question"] for q in questions], 3)
    assert _answered_first(texts, hits, questions) >= 0.9
    start = time.perf_counter()
    warm = build_retriever("dense", texts, tmp_path)
    warm_s = time.perf_counter() - start
    assert (cold.from_cache, warm.from_cache) == (False, True)
    assert warm_s < cold_s
    assert warm.search_many([q["question"] for q in questions], 3) == hits
    assert warm.search(questions[0]["question"], 3) == hits[0]


@pytest.mark.slow
def test_dense_on_the_whole_default_corpus() -> None:
    """The default cache dir: the first run builds (tens of seconds), later runs load."""
    retriever = build_retriever("dense", TEXTS)
    sample = random.Random(3).sample(ONE_HOP, 300)
    hits = retriever.search_many([q["question"] for q in sample], 3)
    assert _answered_first(TEXTS, hits, sample) >= 0.95


def test_a_zmq_batch_of_searches_is_one_batched_retrieval(tmp_path: Path) -> None:
    env = SearchQAEnvironment(cache_dir=str(tmp_path))
    table = EpisodeTable(env)
    calls: list[int] = []
    search_many = env.retriever.search_many

    def counting(queries: list[str], k: int) -> list[list[int]]:
        calls.append(len(queries))
        return search_many(queries, k)

    env.retriever.search_many = counting  # type: ignore[method-assign]
    eids = [table.create()["id"] for _ in range(4)]
    for i, eid in enumerate(eids):
        table.reset(eid, i)
    ops = [
        {"op": "step", "id": e, "action": f"<search>{ONE_HOP[e]['question']}</search>"}
        for e in eids
    ]
    ops.append({"op": "step", "id": eids[0], "action": "no tag"})
    reply = msgpack.unpackb(handle_payload(table, msgpack.packb({"op": "batch", "ops": ops})))
    assert calls == [4]  # one retrieval for the four searches, none per step
    singles = [table.step(op["id"], op["action"])["observation"] for op in ops[:4]]
    assert [r["observation"] for r in reply["results"][:4]] == singles
    assert reply["results"][4]["invalid"] is True
    assert env._prefetched == {}  # results live for one batch only
