"""How the suite is shared between pytest-xdist workers (`scripts/test.sh` runs two on 2 cores:
most of a process test's time is a child starting or a wait, so two at once fill the cores).

- A file runs whole on one worker: its module fixtures (a server, a created model) start once.
- `tests/cluster/` is one unit: one SLURM or Ray cluster on the host at a time.
- The files that use the session's SmolLM2 folder (`tests/smollm2.py`) are one unit: the
  conversion (~95 s of a worker on 2 cores) runs once, not once per worker.
- Costliest files first (by their tests' tiers, `tiers.py`), so no long file starts last and
  leaves one worker running alone at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

CLUSTER = "tests/cluster/"
SMOLLM2 = "tests/policy_creation/test_pretrained.py"
UNITS = {
    CLUSTER: CLUSTER,
    SMOLLM2: SMOLLM2,
    "tests/policy_creation/test_smollm2_stack.py": SMOLLM2,
}
"""Path prefixes whose tests run on one worker, and the unit each belongs to."""
COST = {"slow": 60.0, "engine": 15.0, "process": 4.0, "unit": 0.05}
"""Rough seconds a test of a tier takes on 2 cores, for the order only."""


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or the group of files in `UNITS`."""
    path = nodeid.split("::", 1)[0]
    return next((unit for prefix, unit in UNITS.items() if path.startswith(prefix)), path)


def cost_of(item: pytest.Item) -> float:
    names = {mark.name for mark in item.iter_markers()}
    tier = next(t for t in ("unit", "process", "engine") if t in names)
    return COST[tier] + (COST["slow"] if "slow" in names else 0.0)


def costliest_units_first(items: list[pytest.Item]) -> None:
    """Reorder `items` in place: units by their summed cost, descending; within a unit, as
    collected (sorting is stable)."""
    cost: dict[str, float] = {}
    for item in items:
        unit = unit_of(item.nodeid)
        cost[unit] = cost.get(unit, 0.0) + cost_of(item)
    items.sort(key=lambda item: -cost[unit_of(item.nodeid)])


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's per-file scheduling with `UNITS` kept whole, in collection order (which
    `costliest_units_first` made)."""
    from xdist.scheduler import LoadFileScheduling

    class UnitScheduling(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False  # keep the cost order, not xdist's count order
    return UnitScheduling(config, log)
