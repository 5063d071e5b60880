"""Writes BabyAI's data/train.json and data/test.json (task ids; see levels.py for id -> task).

    python -m agentgym_envs.babyai.make_splits

Train: ids 0-809 (every level, seeds 0-20). Test: 90 ids, 15 per category, each category's
level with seeds 1000-1014 (disjoint from train). Rows: {"item_id": "babyai_<id>", "category"}:
the category is the level's short name in train and the evaluation category in test.

The GoTo family (the single-room GoTo levels of `GOTO_LEVELS`, the README's demo) gets its own
pair: goto_train.json (seeds 2000-2999 of each level) and goto_test.json (seeds 1000-1039, held
out: disjoint from every train split); the category is the level's short name.

The ScalingInter study (docs/results/scalinginter/) trains on `STUDY_LEVELS`, single rooms and
open multi-room layouts where the goal object or door is often out of view, so a policy that
copies the goal well still needs turns to find it: study_train.json (seeds 2000-2999 of each
level) and study_test.json (seeds 1000-1014 of each, held out).
"""

from __future__ import annotations

import json
from pathlib import Path

from agentgym_envs.babyai.levels import CATEGORIES, level_for, task_id

DATA = Path(__file__).parent / "data"
TRAIN = 810
TEST_SEEDS = range(1000, 1015)
GOTO_LEVELS = (
    "BabyAI-GoToObj-v0",
    "BabyAI-GoToLocal-v0",
    "BabyAI-GoToRedBall-v0",
    "BabyAI-GoToRedBallGrey-v0",
    "BabyAI-GoToRedBlueBall-v0",
)
GOTO_TRAIN_SEEDS = range(2000, 3000)
GOTO_TEST_SEEDS = range(1000, 1040)
STUDY_LEVELS = (
    "BabyAI-GoToLocal-v0",
    "BabyAI-GoToDoor-v0",
    "BabyAI-GoToObjDoor-v0",
    "BabyAI-PickupLoc-v0",
    "BabyAI-GoToOpen-v0",
)
STUDY_TEST_SEEDS = range(1000, 1015)


def short(level: str) -> str:
    """'BabyAI-GoToLocal-v0' -> 'GoToLocal'."""
    return level.removeprefix("BabyAI-").removesuffix("-v0")


def family(levels: tuple[str, ...], seeds: range) -> list[dict[str, str]]:
    """Rows of every level of `levels` on each seed, seed-major."""
    return [
        {"item_id": f"babyai_{task_id(level, s)}", "category": short(level)}
        for s in seeds
        for level in levels
    ]


def main() -> None:
    train = [{"item_id": f"babyai_{i}", "category": short(level_for(i)[0])} for i in range(TRAIN)]
    test = sorted(
        (
            {"item_id": f"babyai_{task_id(level, s)}", "category": cat}
            for cat, level in CATEGORIES.items()
            for s in TEST_SEEDS
        ),
        key=lambda r: int(r["item_id"].split("_")[1]),
    )
    goto_train, goto_test = (
        family(GOTO_LEVELS, seeds) for seeds in (GOTO_TRAIN_SEEDS, GOTO_TEST_SEEDS)
    )
    study_train, study_test = (
        family(STUDY_LEVELS, seeds) for seeds in (GOTO_TRAIN_SEEDS, STUDY_TEST_SEEDS)
    )
    DATA.mkdir(exist_ok=True)
    splits = (
        ("train.json", train),
        ("test.json", test),
        ("goto_train.json", goto_train),
        ("goto_test.json", goto_test),
        ("study_train.json", study_train),
        ("study_test.json", study_test),
    )
    for name, rows in splits:
        (DATA / name).write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
        print(f"{name}: {len(rows)} rows")


if __name__ == "__main__":
    main()
