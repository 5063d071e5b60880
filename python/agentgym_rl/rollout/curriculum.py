"""A curriculum by online difficulty: tasks the policy always or never solves are drawn less.

Contract: `Curriculum(source, config, seed)` stands where a `TaskSource` or `TaskMix` does (the
dispatcher's and the sync loop's source: `next()`, `exhausted`, `cursor`). Each task the source
gives is kept with the probability of its band (`config.keep`), else skipped (it counts as drawn
for its epoch) and the next one is considered. A task's key is its `item_id`, or its category
with `by: category` (a task without one is its own key). Its band comes from the outcomes of its
key's last `window` episodes: `unseen` (fewer than `min_episodes`), `unsolved` (success rate <=
`low`), `solved` (>= `high`), else `edge`. `record(task, success)` adds a finished episode's
outcome (`note_outcome`, which both loops call, leaves env failures out: not the policy's).
Keep probabilities are > 0 (validated), so no task is never drawn.

Deterministic and resumable: draw k decides by a generator seeded with `(seed, k)`, so
`state()` (draws, skips by band, each key's recent outcomes) is all a restart needs;
`Curriculum(..., state=saved)` continues from it. `rows()` is the table of keys by band
(`saved_state` keeps it for the run summary), `shares()` the kept share of each band's draws.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from agentgym_rl.config.rollout import CurriculumConfig
from agentgym_rl.episode.agent import Played
from agentgym_rl.episode.dataset import Cursor, MixCursor, Task
from agentgym_rl.episode.outcome import is_success

BANDS = ("unseen", "edge", "unsolved", "solved")
STATE_FILE = "curriculum.json"
"""Where a rollout server keeps the curriculum's state (its log dir), beside `cursor.json`."""


class Tasks(Protocol):
    """What a curriculum draws from (`TaskSource`, `TaskMix`)."""

    @property
    def cursor(self) -> Cursor | MixCursor: ...
    @property
    def exhausted(self) -> bool: ...
    def next(self) -> Task | None: ...


@dataclass(frozen=True, slots=True)
class BandRow:
    """One band of the table: its keys, their recent success, and what its draws became."""

    band: str
    keys: int
    success: float | None
    """Mean recent success of its keys (None: no outcome)."""
    considered: int
    kept: int


class Curriculum:
    """See the module docstring."""

    def __init__(
        self,
        source: Tasks,
        config: CurriculumConfig,
        *,
        seed: int = 0,
        state: Mapping[str, Any] | None = None,
    ) -> None:
        self.source, self.config, self.seed = source, config, seed
        saved = state or {}
        self._draws = int(saved.get("draws", 0))
        self._considered: Counter[str] = Counter(saved.get("considered", {}))
        self._kept: Counter[str] = Counter(saved.get("kept", {}))
        self._recent: dict[str, deque[bool]] = {
            key: deque((bool(x) for x in outcomes), maxlen=config.window)
            for key, outcomes in (saved.get("recent") or {}).items()
        }

    @property
    def cursor(self) -> Cursor | MixCursor:
        return self.source.cursor

    @property
    def exhausted(self) -> bool:
        return self.source.exhausted

    def key(self, task: Task) -> str:
        return task.category or task.item_id if self.config.by == "category" else task.item_id

    def band(self, key: str) -> str:
        recent = self._recent.get(key)
        if recent is None or len(recent) < self.config.min_episodes:
            return "unseen"
        rate = sum(recent) / len(recent)
        if rate <= self.config.low:
            return "unsolved"
        if rate >= self.config.high:
            return "solved"
        return "edge"

    def next(self) -> Task | None:
        """The next task kept, or None once the source is exhausted."""
        while (task := self.source.next()) is not None:
            band = self.band(self.key(task))
            rng = random.Random(f"agentgym-rl/{self.seed}/curriculum/{self._draws}")
            self._draws += 1
            self._considered[band] += 1
            if rng.random() < getattr(self.config.keep, band):
                self._kept[band] += 1
                return task
        return None

    def __iter__(self) -> Iterator[Task]:
        while (task := self.next()) is not None:
            yield task

    def record(self, task: Task, success: bool) -> None:
        key = self.key(task)
        if key not in self._recent:
            self._recent[key] = deque(maxlen=self.config.window)
        self._recent[key].append(bool(success))

    def state(self) -> dict[str, Any]:
        return {
            "draws": self._draws,
            "considered": dict(self._considered),
            "kept": dict(self._kept),
            "recent": {k: [int(x) for x in v] for k, v in self._recent.items()},
        }

    def shares(self) -> dict[str, float]:
        """Per band, the share of its considered draws that were kept."""
        return {b: self._kept[b] / n for b in BANDS if (n := self._considered[b])}

    def rows(self) -> list[BandRow]:
        keys: dict[str, list[float]] = {b: [] for b in BANDS}
        for key, recent in self._recent.items():
            keys[self.band(key)].append(sum(recent) / len(recent) if recent else 0.0)
        return [
            BandRow(
                b,
                len(keys[b]),
                sum(keys[b]) / len(keys[b]) if keys[b] else None,
                self._considered[b],
                self._kept[b],
            )
            for b in BANDS
        ]


def note_outcome(source: object, task: Task, played: Played) -> None:
    """Tell a curriculum whether an episode of `task` succeeded (any other source ignores it;
    an env failure is not the policy's doing)."""
    if isinstance(source, Curriculum) and played.failure is None:
        source.record(task, is_success(task.env, played.sample.reward))


def saved_state(curriculum: Curriculum) -> dict[str, Any]:
    """What `STATE_FILE` holds: the state, the settings it was banded by and the table of keys
    by band (`rows`, which the run summary prints)."""
    rows = [asdict(r) for r in curriculum.rows()]
    return {"config": curriculum.config.model_dump(), **curriculum.state(), "rows": rows}
