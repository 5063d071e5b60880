"""Writes the WebArena-format task set of our own sites and its train/test splits.

    python -m agentgym_envs.web.make_tasks [--out DIR] [--seed N]

`webarena_tasks.json` is a JSON list of WebArena task configs (`sites`, `task_id`,
`require_login`, `storage_state`, `start_url`, `intent`, `intent_template`,
`instantiation_dict`, `require_reset`, `eval`), URLs written with WebArena's placeholders
(`__SHOPPING__`, `__REDDIT__`), plus our `category` (`shop/info`, `shop/nav`, `shop/action`,
`forum/info`, `forum/nav`, `forum/action`); task id = position = `data_idx`. Every reference
answer is read off the sites' generated data (`sites/data.py`, same seed), so the task set and
the served sites agree. Kinds: `info` (stop with the answer; string_match), `nav` (end on the
right page; url_match), `action` (change the site; program_html). A few `fuzzy_match` tasks
need a judge and are in neither split. webarena_test.json takes a fixed number per category
(seeded), webarena_train.json the other scored tasks; rows are
`{"item_id": "webarena_<n>", "category": ...}`. Same seed, same bytes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from agentgym_envs.generated_data import run_main, split_json, write_files
from agentgym_envs.web.sites.data import SEED, generate
from agentgym_envs.web.sites.forum_tasks import forum_tasks
from agentgym_envs.web.sites.shop_tasks import shop_tasks

DATA = Path(__file__).parent / "data"
TEST = {"shop/info": 10, "shop/nav": 6, "shop/action": 8}
TEST |= {"forum/info": 10, "forum/nav": 8, "forum/action": 8}
Task = dict[str, Any]


def build(seed: int = SEED) -> list[Task]:
    shop, forum = generate(seed)
    rng = random.Random(f"webarena-tasks-{seed}")
    tasks = shop_tasks(shop, rng) + forum_tasks(forum, rng)
    for i, task in enumerate(tasks):
        task["task_id"] = i
    return tasks


def is_fuzzy(task: Task) -> bool:
    return "fuzzy_match" in (task["eval"].get("reference_answers") or {})


def write(out: Path, seed: int = SEED) -> dict[str, int]:
    """Generate into `out`; returns rows per file."""
    tasks = build(seed)
    rng = random.Random(f"webarena-split-{seed}")
    test: list[int] = []
    for category, n in TEST.items():
        pool = [t["task_id"] for t in tasks if t["category"] == category and not is_fuzzy(t)]
        test += rng.sample(pool, n)
    chosen = set(test)
    train = [t["task_id"] for t in tasks if t["task_id"] not in chosen and not is_fuzzy(t)]

    def rows(ids: list[int]) -> list[dict[str, str]]:
        return [{"item_id": f"webarena_{i}", "category": tasks[i]["category"]} for i in ids]

    files = {
        "webarena_tasks.json": json.dumps(tasks, indent=1, ensure_ascii=False) + "\n",
        "webarena_test.json": split_json(rows(sorted(test))),
        "webarena_train.json": split_json(rows(train)),
    }
    write_files(out, files)
    return {
        "webarena_tasks.json": len(tasks),
        "webarena_test.json": len(test),
        "webarena_train.json": len(train),
    }


def main() -> None:
    run_main("python -m agentgym_envs.web.make_tasks", DATA, SEED, write)


if __name__ == "__main__":
    main()
