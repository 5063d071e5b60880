"""Writes SearchQA's data/: the generated corpus, questions and train/test splits.

    python -m agentgym_envs.searchqa.make_data [--out DIR] [--seed N]

corpus.jsonl is in wiki-18's format (`{"id", "contents": "\"Title\"\ntext"}`), questions.jsonl
in Search-R1's (`{"id", "question", "golden_answers", "data_source"}` plus our `hops` and
`category`); task id = line number in questions.jsonl. test.json takes a fixed number of
questions per hop count (seeded) among all but the extra 1-hop questions, train.json the rest, and `*_1hop.json` their 1-hop questions
alone (the Deep Search demo's splits); rows are `{"item_id": "searchqa_<n>", "category":
"<h>-hop", "reference": answer}` (the reference a judge may be shown). Same seed, same bytes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from agentgym_envs.generated_data import run_main, split_json, write_files
from agentgym_envs.searchqa.knowledge import QUESTIONS, generate

DATA = Path(__file__).parent / "data"
SEED = 20
TEST = {1: 250, 2: 100, 3: 50}


def _jsonl(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def write(out: Path, seed: int = SEED) -> dict[str, int]:
    """Generate into `out`; returns rows per file."""
    passages, questions = generate(seed)
    corpus = [{"id": str(i), "contents": f'"{p.title}"\n{p.text}'} for i, p in enumerate(passages)]
    qrows = [
        {
            "id": f"searchqa_{i}",
            "question": q.question,
            "golden_answers": [q.answer],
            "data_source": "generated",
            "hops": q.hops,
            "category": f"{q.hops}-hop",
            "template": q.template,
        }
        for i, q in enumerate(questions)
    ]
    rng = random.Random(f"searchqa-split-{seed}")
    test: list[int] = []
    base = sum(QUESTIONS.values())  # the extra 1-hop questions after them only ever train
    for hops, n in TEST.items():
        test += rng.sample([i for i, q in enumerate(questions[:base]) if q.hops == hops], n)
    chosen = set(test)
    train = [i for i in range(len(questions)) if i not in chosen]

    def rows(ids: list[int]) -> list[dict[str, str]]:
        # the reference answer: what a judge compares an answer with (the env scores exact match)
        return [
            {
                "item_id": f"searchqa_{i}",
                "category": f"{questions[i].hops}-hop",
                "reference": questions[i].answer,
            }
            for i in ids
        ]

    def one_hop(ids: list[int]) -> list[int]:
        return [i for i in ids if questions[i].hops == 1]

    splits = {
        "test.json": sorted(test),
        "train.json": train,
        "test_1hop.json": one_hop(sorted(test)),
        "train_1hop.json": one_hop(train),
    }
    files = {
        "corpus.jsonl": _jsonl(corpus),  # type: ignore[arg-type]
        "questions.jsonl": _jsonl(qrows),  # type: ignore[arg-type]
        **{name: split_json(rows(ids)) for name, ids in splits.items()},
    }
    write_files(out, files)
    return {
        "corpus.jsonl": len(corpus),
        "questions.jsonl": len(qrows),
        **{name: len(ids) for name, ids in splits.items()},
    }


def main() -> None:
    run_main("python -m agentgym_envs.searchqa.make_data", DATA, SEED, write)


if __name__ == "__main__":
    main()
