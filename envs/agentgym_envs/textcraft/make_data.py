"""Writes TextCraft's data/: the pinned goal list and the train/test/extra task splits.

    python -m agentgym_envs.textcraft.make_data

goals.json lists every goal (crafting depth 1-4) sorted by (depth, name): task id = index, never
filesystem order. Splits follow the reference's sizes, 100 test and 374 train ids, stratified by
depth (largest remainder) with a fixed seed; the remaining ids go to extra.json (valid tasks in
neither split). Rows: {"item_id": "textcraft_<id>", "category": "depth_<d>"}.
shallow_test.json holds the test ids of depth 1-2 and shallow_train.json every other id of
depth 1-2 (train and extra): the goals a small policy is trained on (configs/train/
textcraft_shallow.yaml).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from agentgym_envs.textcraft.recipes import CraftingGraph

DATA = Path(__file__).parent / "data"
TEST, TRAIN = 100, 374


def _stratified(by_depth: dict[int, list[int]], total: int) -> dict[int, list[int]]:
    """Take `total` ids, each depth in proportion to its size (largest remainder)."""
    size = sum(len(v) for v in by_depth.values())
    quotas = {d: total * len(v) / size for d, v in by_depth.items()}
    take = {d: int(q) for d, q in quotas.items()}
    for d in sorted(quotas, key=lambda d: (take[d] - quotas[d], d))[: total - sum(take.values())]:
        take[d] += 1
    return {d: by_depth[d][: take[d]] for d in by_depth}


def _rows(ids: list[int], depth_of: list[int]) -> list[dict[str, str]]:
    return [{"item_id": f"textcraft_{i}", "category": f"depth_{depth_of[i]}"} for i in sorted(ids)]


def main() -> None:
    goals = CraftingGraph().goals
    depth_of = [d for _, d in goals]
    by_depth: dict[int, list[int]] = {}
    for i, d in enumerate(depth_of):
        by_depth.setdefault(d, []).append(i)
    for d, ids in by_depth.items():
        random.Random(f"textcraft-split-{d}").shuffle(ids)
    test = _stratified(by_depth, TEST)
    rest = {d: [i for i in ids if i not in set(test[d])] for d, ids in by_depth.items()}
    train = _stratified(rest, TRAIN)
    extra = [i for d, ids in rest.items() for i in ids if i not in set(train[d])]
    DATA.mkdir(exist_ok=True)
    files: dict[str, list[dict[str, Any]]] = {
        "goals.json": [{"item": g, "depth": d} for g, d in goals],
        "test.json": _rows([i for v in test.values() for i in v], depth_of),
        "train.json": _rows([i for v in train.values() for i in v], depth_of),
        "extra.json": _rows(extra, depth_of),
    }
    shallow = [i for i, d in enumerate(depth_of) if d <= 2]
    held_out = {i for v in test.values() for i in v}
    files["shallow_test.json"] = _rows([i for i in shallow if i in held_out], depth_of)
    files["shallow_train.json"] = _rows([i for i in shallow if i not in held_out], depth_of)
    for name, rows in files.items():
        text = "[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n"
        (DATA / name).write_text(text)
        print(f"{name}: {len(rows)} rows")


if __name__ == "__main__":
    main()
