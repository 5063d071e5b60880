"""Writes Maze's data/train.json and data/test.json (task ids; see layout.py for id -> maze).

    python -m agentgym_envs.maze.make_splits

Train: ids 0-2999, every id with the band of its shortest path as category. Test: the first 50
ids of each band from 100,000 on (150 rows, disjoint from train; a band is rare for no size, but
stratifying keeps the test's categories the same size). Rows: {"item_id": "maze_<id>",
"category": "short" | "medium" | "long"}. The horizon ladder, ladder_test.json: the first 60 ids
of each rung of shortest-path length (`RUNGS`: 1-2, 3-4, 5-8, 9-16 and 17+ moves) from 200,000
on (300 rows), category "p<rung>".
"""

from __future__ import annotations

import json
from itertools import count
from pathlib import Path

from agentgym_envs.maze.layout import BANDS, generate

DATA = Path(__file__).parent / "data"
TRAIN = 3000
TEST_FROM, TEST_PER_BAND = 100_000, 50
LADDER_FROM, LADDER_PER_RUNG = 200_000, 60
RUNGS = ((1, 2), (3, 4), (5, 8), (9, 16), (17, None))
"""Shortest-path lengths of the ladder's rungs (inclusive; None: no upper bound)."""


def _row(data_idx: int, category: str) -> dict[str, str]:
    return {"item_id": f"maze_{data_idx}", "category": category}


def test_rows() -> list[dict[str, str]]:
    taken: dict[str, list[int]] = {b: [] for b in BANDS}
    for i in count(TEST_FROM):
        ids = taken[generate(i).category()]
        if len(ids) < TEST_PER_BAND:
            ids.append(i)
        if all(len(v) == TEST_PER_BAND for v in taken.values()):
            break
    return sorted((_row(i, b) for b, ids in taken.items() for i in ids), key=_idx)


def rung(path_length: int) -> str:
    """The ladder category of a shortest path of `path_length` moves ("p1-2" ... "p17+")."""
    for low, high in RUNGS:
        if high is None or path_length <= high:
            return f"p{low}+" if high is None else f"p{low}-{high}"
    raise AssertionError("RUNGS end unbounded")


def ladder_rows() -> list[dict[str, str]]:
    names = [rung(high or low) for low, high in RUNGS]
    taken: dict[str, list[int]] = {name: [] for name in names}
    for i in count(LADDER_FROM):
        path = generate(i).shortest_path()
        ids = taken[rung(len(path or []))]
        if len(ids) < LADDER_PER_RUNG:
            ids.append(i)
        if all(len(v) == LADDER_PER_RUNG for v in taken.values()):
            break
    return sorted((_row(i, r) for r, ids in taken.items() for i in ids), key=_idx)


def _idx(row: dict[str, str]) -> int:
    return int(row["item_id"].rsplit("_", 1)[1])


def main() -> None:
    train = [_row(i, generate(i).category()) for i in range(TRAIN)]
    DATA.mkdir(exist_ok=True)
    splits = (
        ("train.json", train),
        ("test.json", test_rows()),
        ("ladder_test.json", ladder_rows()),
    )
    for name, rows in splits:
        (DATA / name).write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
        print(f"{name}: {len(rows)} rows")


if __name__ == "__main__":
    main()
