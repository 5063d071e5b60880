"""SciWorld task ids: AgentGym's numbering of (task, variation) pairs, and topic categories.

Contract: `TASK_LIST[data_idx]` is the `SciTask` that `data_idx` names. The list walks the
simulator's task order ("1-1" ... "10-2", as `scienceworld`'s tasks.json lists them), skips the
tasks AgentGym's server skips (5-1, 5-2, 9-1, 9-2, 9-3, 10-1, 10-2) and appends one entry per
variation, 0 .. max variations - 1: the same ids AgentGym's SciWorld server serves. With
scienceworld 1.2.3 that is 4,639 ids (`NUM_TASKS`). The variation counts are pinned here so that
listing and numbering need no JVM; `check_variation_counts` compares them with a live simulator
(the env does at start-up, a test does too) so a different simulator version fails loudly instead
of silently renumbering the splits.

Categories are the simulator's topics, named as the AgentGym-RL paper's test split names them
where it has them: Measure (2-x), Test-Cond (3-3, 3-4), Find (4-x), Chem-Mix (6-x), Lifespan
(7-x); the others get their own: State-of-Matter (1-x), Power-Component (3-1, 3-2),
Life-Stages (8-x).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

# (task id, simulator task name, max variations) in the simulator's order, scienceworld 1.2.3.
SIMULATOR_TASKS: tuple[tuple[str, str, int], ...] = (
    ("1-1", "boil", 30),
    ("1-2", "melt", 30),
    ("1-3", "freeze", 30),
    ("1-4", "change-the-state-of-matter-of", 30),
    ("2-1", "use-thermometer", 540),
    ("2-2", "measure-melting-point-known-substance", 436),
    ("2-3", "measure-melting-point-unknown-substance", 300),
    ("3-1", "power-component", 20),
    ("3-2", "power-component-renewable-vs-nonrenewable-energy", 20),
    ("3-3", "test-conductivity", 900),
    ("3-4", "test-conductivity-of-unknown-substances", 600),
    ("4-1", "find-living-thing", 300),
    ("4-2", "find-non-living-thing", 300),
    ("4-3", "find-plant", 300),
    ("4-4", "find-animal", 300),
    ("5-1", "grow-plant", 126),
    ("5-2", "grow-fruit", 126),
    ("6-1", "chemistry-mix", 32),
    ("6-2", "chemistry-mix-paint-secondary-color", 36),
    ("6-3", "chemistry-mix-paint-tertiary-color", 36),
    ("7-1", "lifespan-longest-lived", 125),
    ("7-2", "lifespan-shortest-lived", 125),
    ("7-3", "lifespan-longest-lived-then-shortest-lived", 125),
    ("8-1", "identify-life-stages-1", 14),
    ("8-2", "identify-life-stages-2", 10),
    ("9-1", "inclined-plane-determine-angle", 168),
    ("9-2", "inclined-plane-friction-named-surfaces", 1386),
    ("9-3", "inclined-plane-friction-unnamed-surfaces", 162),
    ("10-1", "mendelian-genetics-known-plant", 120),
    ("10-2", "mendelian-genetics-unknown-plant", 480),
)
# AgentGym's server leaves these out of its numbering.
EXCLUDED = frozenset({"5-1", "5-2", "9-1", "9-2", "9-3", "10-1", "10-2"})
NUM_TASKS = 4639

_CATEGORY_BY_ID = {"2-": "Measure", "4-": "Find", "6-": "Chem-Mix", "7-": "Lifespan"}
_CATEGORY_BY_ID |= {"1-": "State-of-Matter", "8-": "Life-Stages"}
_CATEGORY_EXACT = {
    "3-1": "Power-Component",
    "3-2": "Power-Component",
    "3-3": "Test-Cond",
    "3-4": "Test-Cond",
}
# The paper's 200-task test split, per category.
TEST_CATEGORY_SIZES: Mapping[str, int] = {
    "Measure": 53,
    "Test-Cond": 83,
    "Find": 44,
    "Chem-Mix": 5,
    "Lifespan": 15,
}


def category(task_id: str) -> str:
    """'3-3' -> 'Test-Cond', '2-1' -> 'Measure' (see the module docs)."""
    if task_id in _CATEGORY_EXACT:
        return _CATEGORY_EXACT[task_id]
    return _CATEGORY_BY_ID[task_id[: task_id.index("-") + 1]]


@dataclass(frozen=True, slots=True)
class SciTask:
    """One task id's simulator task and variation."""

    task_id: str  # "2-1"
    name: str  # "use-thermometer": what the simulator's load() takes
    variation: int

    @property
    def category(self) -> str:
        return category(self.task_id)


def build_task_list(counts: Mapping[str, int] | None = None) -> tuple[SciTask, ...]:
    """The flat id list; `counts` (task name -> max variations) overrides the pinned counts."""
    out: list[SciTask] = []
    for tid, name, pinned in SIMULATOR_TASKS:
        if tid in EXCLUDED:
            continue
        n = pinned if counts is None else counts[name]
        out.extend(SciTask(tid, name, v) for v in range(n))
    return tuple(out)


TASK_LIST = build_task_list()
assert len(TASK_LIST) == NUM_TASKS


def first_index() -> dict[str, int]:
    """Task id -> the data_idx of its variation 0 (so `first_index()[t] + v` is (t, v))."""
    out: dict[str, int] = {}
    for i, task in enumerate(TASK_LIST):
        out.setdefault(task.task_id, i)
    return out


def check_variation_counts(task_names: list[str], max_variations: Callable[[str], int]) -> None:
    """Raise RuntimeError when the live simulator's tasks or variation counts differ from the
    pinned ones (the ids, and with them the split files, would mean other tasks)."""
    pinned = {name: n for _, name, n in SIMULATOR_TASKS}
    if sorted(task_names) != sorted(pinned):
        raise RuntimeError(
            f"the ScienceWorld simulator lists other tasks than scienceworld 1.2.3: {task_names}"
        )
    wrong = {name: (n, max_variations(name)) for name, n in pinned.items()}
    wrong = {k: v for k, v in wrong.items() if v[0] != v[1]}
    if wrong:
        raise RuntimeError(
            "the ScienceWorld simulator's variation counts differ from the pinned ones "
            f"(name: (pinned, live)): {wrong}; task ids would change: use scienceworld==1.2.3"
        )
