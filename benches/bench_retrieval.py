"""SearchQA retrieval: index build time (cold, and warm from the on-disk cache) and queries/s at
batch 1 and batch 32, for the BM25 (bm25s) and dense (all-MiniLM-L6-v2, numpy dot product)
retrievers over the default generated corpus. Queries are the 1-hop questions.

The dense model's load (torch + weights, once per process) is timed on its own: a server's
second start costs model load + warm load. `--quick` (< 60 s on 2 cores) indexes the first
`--quick-passages` passages for dense and times fewer queries.

    python benches/bench_retrieval.py [--quick] [--queries 256]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from agentgym_envs.searchqa.datafiles import load_corpus
from agentgym_envs.searchqa.env import DATA
from agentgym_envs.searchqa.retrieval import _load_encoder, build_retriever
from figures import figure


def queries_per_s(retriever, queries: list[str], batch: int, k: int = 3) -> float:
    start = time.perf_counter()
    for i in range(0, len(queries), batch):
        retriever.search_many(queries[i : i + batch], k)
    return len(queries) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--queries", type=int, default=256)
    parser.add_argument("--quick-passages", type=int, default=600)
    args = parser.parse_args()
    texts = [d.contents for d in load_corpus(DATA / "corpus.jsonl")]
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").read_text().splitlines()]
    n_queries = 64 if args.quick else args.queries
    queries = [q["question"] for q in questions if q["hops"] == 1][:n_queries]

    start = time.perf_counter()
    _load_encoder()
    model_s = time.perf_counter() - start
    print(f"dense model load (torch + MiniLM weights, once per process): {model_s:.2f} s")
    print(
        f"{'retriever':<10}{'passages':>10}{'build cold s':>14}{'warm s':>9}"
        f"{'q/s b=1':>10}{'q/s b=32':>10}"
    )
    for kind in ("bm25", "dense"):
        corpus = texts[: args.quick_passages] if args.quick and kind == "dense" else texts
        with tempfile.TemporaryDirectory() as cache:
            cold = build_retriever(kind, corpus, Path(cache))
            warm = build_retriever(kind, corpus, Path(cache))
            assert not cold.from_cache and warm.from_cache
            one = queries_per_s(warm, queries[: max(16, len(queries) // 4)], 1)
            many = queries_per_s(warm, queries, 32)
        print(
            f"{kind:<10}{len(corpus):>10}{cold.build_s:>14.2f}{warm.build_s:>9.3f}"
            f"{one:>10,.0f}{many:>10,.0f}"
        )
        figure("retrieval", f"{kind} queries, batches of 32", many, "queries/s")


if __name__ == "__main__":
    main()
