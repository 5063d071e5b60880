"""Writes SciWorld's data/train.json and data/test.json from ScienceWorld's own variation split.

    python -m agentgym_envs.sciworld.make_splits      # starts one simulator JVM (~3 s)

ScienceWorld splits every task's variations into train / dev / test (`getVariationsTrain`,
`getVariationsTest` after loading the task). Ours, over the task ids of `tasks.TASK_LIST`:

- train: every train variation of every numbered task (2,312 ids, all eight categories);
- test: the AgentGym-RL paper's 200 tasks, per category Measure 53, Test-Cond 83, Find 44,
  Chem-Mix 5, Lifespan 15, drawn from that category's test variations (all its tasks pooled) by
  `random.Random("sciworld-test-<category>").sample(pool, k)` over the pool in id order, so the
  draw is reproducible and no train id can enter it. The paper's own ids are only in a data
  release, not in code: this is a split of the same shape, not the same tasks.

Rows: `{"item_id": "sciworld_<data_idx>", "category": "<category>"}`, one per line, by id.
`build_splits` is the pure part (a test rebuilds the files from the simulator and compares).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from pathlib import Path

from agentgym_envs.sciworld.tasks import TASK_LIST, TEST_CATEGORY_SIZES

DATA = Path(__file__).parent / "data"
Row = dict[str, str]


def variation_sets(
    load: Callable[[str], tuple[list[int], list[int]]],
) -> dict[str, tuple[list[int], list[int]]]:
    """Task name -> (train variations, test variations), from `load(name)`."""
    names = dict.fromkeys(t.name for t in TASK_LIST)
    return {name: load(name) for name in names}


def build_splits(sets: Mapping[str, tuple[list[int], list[int]]]) -> tuple[list[Row], list[Row]]:
    """(train rows, test rows) from each task's (train, test) variation lists."""
    train: list[Row] = []
    pools: dict[str, list[int]] = {c: [] for c in TEST_CATEGORY_SIZES}
    for idx, task in enumerate(TASK_LIST):
        train_vars, test_vars = (set(v) for v in sets[task.name])
        if task.variation in train_vars:
            train.append({"item_id": f"sciworld_{idx}", "category": task.category})
        elif task.variation in test_vars and task.category in pools:
            pools[task.category].append(idx)
    test_ids: list[tuple[int, str]] = []
    for cat, k in TEST_CATEGORY_SIZES.items():
        drawn = random.Random(f"sciworld-test-{cat}").sample(pools[cat], k)
        test_ids += [(idx, cat) for idx in drawn]
    test = [{"item_id": f"sciworld_{i}", "category": c} for i, c in sorted(test_ids)]
    return train, test


def from_simulator() -> tuple[list[Row], list[Row]]:
    """The splits, with variation lists asked from a fresh simulator JVM."""
    from agentgym_envs.sciworld.gateways import Gateway

    gw = Gateway()
    try:

        def load(name: str) -> tuple[list[int], list[int]]:
            gw.call("load", name, 0, "", False)
            return (
                [int(v) for v in gw.call("getVariationsTrain")],
                [int(v) for v in gw.call("getVariationsTest")],
            )

        return build_splits(variation_sets(load))
    finally:
        gw.kill()


def render(rows: list[Row]) -> str:
    return "[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n"


def main() -> None:
    train, test = from_simulator()
    DATA.mkdir(exist_ok=True)
    for name, rows in (("train.json", train), ("test.json", test)):
        (DATA / name).write_text(render(rows))
        print(f"{name}: {len(rows)} rows")


if __name__ == "__main__":
    main()
