"""Writes Wordle's data/train.json and data/test.json (task ids; see env.py for id -> word).

    python -m agentgym_envs.wordle.make_splits

Test: every tenth id (0, 10, ..., 1990: 200 ids, the same share of each frequency band);
train: the other 1,800. Rows: {"item_id": "wordle_<id>", "category": band}, band "common",
"medium" or "rare" (`env.band`).
"""

from __future__ import annotations

import json
from pathlib import Path

from agentgym_envs.wordle.env import band, load_words

DATA = Path(__file__).parent / "data"
TEST_EVERY = 10


def main() -> None:
    targets, _ = load_words()
    rows = [{"item_id": f"wordle_{i}", "category": band(i)} for i in range(len(targets))]
    splits = {
        "train.json": [r for i, r in enumerate(rows) if i % TEST_EVERY],
        "test.json": [r for i, r in enumerate(rows) if not i % TEST_EVERY],
    }
    DATA.mkdir(exist_ok=True)
    for name, split in splits.items():
        (DATA / name).write_text("[\n" + ",\n".join(json.dumps(r) for r in split) + "\n]\n")
        print(f"{name}: {len(split)} rows")


if __name__ == "__main__":
    main()
