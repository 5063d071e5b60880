"""The ladder of BabyAI GoTo tasks: held-out cells by how many turns the scripted rule needs and
by how many visible objects the goal must be told apart from. Writes data/ladder_test.json and
the distractor split pair data/distractor_train.json / data/distractor_test.json.

    python -m agentgym_envs.babyai.ladder

A task's cell is `t<turns>-d<distractors>`: `turns` is the fewest episode turns the rule (go to
the goal when it is listed, else turn; turning left or turning right, whichever needs fewer)
takes to succeed (1: the goal in view; 2: one turn, then go; 3: two turns first); `distractors`
is the number of other objects listed beside the goal when the rule goes to it, bucketed `0`,
`1-2` and `3+`. Tasks are GoToObj (one object: no distractors; goals of every colour and type)
and GoToLocal (eight objects in the room, goals of every colour and type). The test cells take
seeds 10000-14999, disjoint from every other split; `ladder_test.json` keeps up to `PER_CELL`
tasks of each cell, and cells with fewer than `MIN_CELL` are left out. The distractor pair is
GoToLocal tasks whose goal is told apart from 3+ listed objects: the training split on seeds
15000-18999, the held-out one the `d3+` cells of the ladder.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from agentgym_envs.babyai.env import BabyAIEpisode, compact_mission, fits_mission
from agentgym_envs.babyai.levels import task_id

DATA = Path(__file__).parent / "data"
LEVELS = ("BabyAI-GoToObj-v0", "BabyAI-GoToLocal-v0")
TEST_SEEDS = range(10000, 15000)
TRAIN_SEEDS = range(15000, 19000)
PER_CELL = 80
MIN_CELL = 60
MAX_TURNS = 6


def bucket(distractors: int) -> str:
    return "0" if distractors == 0 else "1-2" if distractors <= 2 else "3+"


def rule_turns(episode: BabyAIEpisode, data_idx: int, turn: str) -> tuple[int, int] | None:
    """(turns to success, other objects listed when it goes) of the rule turning `turn` each
    time the goal is not listed; None when it does not succeed within `MAX_TURNS`."""
    episode.reset(data_idx)
    goal = compact_mission(episode.minigrid_env.mission)
    for turns in range(1, MAX_TURNS + 1):
        listed = [a for a in episode.available_actions() if a.startswith("go to ")]
        fits = [a for a in listed if fits_mission(a, goal)]
        if fits:
            result = episode.step(fits[0])
            return (turns, len(listed) - len(fits)) if result.done and result.score > 0 else None
        episode.step(turn)
    return None


def cell_of(episode: BabyAIEpisode, data_idx: int) -> str | None:
    """The task's ladder cell, or None when the rule cannot solve it in `MAX_TURNS` turns."""
    runs = [r for r in (rule_turns(episode, data_idx, t) for t in ("turn left", "turn right")) if r]
    if not runs:
        return None
    turns, distractors = min(runs)
    return f"t{turns}-d{bucket(distractors)}"


def cells(ids: Iterable[int]) -> dict[str, list[int]]:
    """Task ids by ladder cell, in the order given."""
    episode = BabyAIEpisode(compact=True)
    out: dict[str, list[int]] = defaultdict(list)
    try:
        for data_idx in ids:
            cell = cell_of(episode, data_idx)
            if cell is not None:
                out[cell].append(data_idx)
    finally:
        episode.close()
    return dict(out)


def _rows(ids_by_cell: dict[str, list[int]]) -> list[dict[str, str]]:
    return [
        {"item_id": f"babyai_{i}", "category": cell}
        for cell, ids in sorted(ids_by_cell.items())
        for i in ids
    ]


def main() -> None:
    test = cells(task_id(level, s) for s in TEST_SEEDS for level in LEVELS)
    kept = {c: ids[:PER_CELL] for c, ids in test.items() if len(ids) >= MIN_CELL}
    local = task_id("BabyAI-GoToLocal-v0", 0) % 40
    train = cells(task_id("BabyAI-GoToLocal-v0", s) for s in TRAIN_SEEDS)
    distract_train = {c: ids for c, ids in train.items() if c.endswith("d3+")}
    distract_test = {c: [i for i in ids if i % 40 == local] for c, ids in kept.items()}
    distract_test = {c: ids for c, ids in distract_test.items() if c.endswith("d3+")}
    for name, rows in (
        ("ladder_test.json", _rows(kept)),
        ("distractor_train.json", _rows(distract_train)),
        ("distractor_test.json", _rows(distract_test)),
    ):
        (DATA / name).write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
        counts = {
            c: sum(r["category"] == c for r in rows) for c in sorted({r["category"] for r in rows})
        }
        print(f"{name}: {len(rows)} rows {counts}")
    skipped = {c: len(ids) for c, ids in test.items() if len(ids) < MIN_CELL}
    print(f"cells with fewer than {MIN_CELL} test tasks, left out: {skipped}")


if __name__ == "__main__":
    main()
