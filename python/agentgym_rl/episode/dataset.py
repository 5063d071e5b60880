"""Tasks from a split file, shuffled per epoch, resumable from a saved cursor.

Contract: a split is a JSON list of `{"item_id": "<env>_<int>", "category"?: str,
"reference"?: str}`, in a file or served by the env under a name it declares (`train`); the
prefix names the env and the integer is the `data_idx` passed to reset; `reference` is the task's
reference answer, what a judge may compare an episode against (`judging/`). `TaskSource` yields
tasks in a per-epoch order that is a pure function of `(seed, epoch)`, so `Cursor(epoch, index)`
(the position of the next task) is all a restart needs to continue exactly where it stopped.
Each task is run `group_size` times as one GRPO group by the dispatcher.

`TaskMix` draws from several sources (one env's split each) by weight: draw `k` picks its source
by a generator seeded with `(seed, k)`, then takes that source's next task, so a `MixCursor`
(draws made and each source's cursor) resumes a mixed run exactly too. A source that finished
its epochs is no longer drawn; the mix is exhausted when all are.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentgym_rl.env_discovery import is_split_name, shipped_path, split_rows


class DatasetError(ValueError):
    """The split file is missing, malformed, or names another env."""


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a split: `item_id` as written, its env, its reset index, category and
    reference answer."""

    item_id: str
    env: str
    data_idx: int
    category: str | None = None
    reference: str | None = None


@dataclass(frozen=True, slots=True)
class Cursor:
    """Position of the next task: pass `epoch` and `index` back to resume."""

    epoch: int = 0
    index: int = 0


def parse_item_id(item_id: str) -> tuple[str, int]:
    """`"babyai_17"` -> `("babyai", 17)` (the env name may itself contain underscores)."""
    env, sep, idx = item_id.rpartition("_")
    if not sep or not env or not idx.isdigit():
        raise DatasetError(f"item_id {item_id!r} is not <env>_<int>")
    return env, int(idx)


def load_split(path: str | Path, env: str | None = None, seed: int = 0) -> list[Task]:
    """Read a split: a file, or the name of a split `env` declares (`train`, `test`: the env's
    own `tasks(name, seed)`). With `env`, every item must belong to it. A shipped split file may
    be named as configs name it from any directory (`envs/agentgym_envs/...`: `shipped_path`)."""
    rows = _declared_rows(str(path), env, seed) if is_split_name(path) else _file_rows(path)
    if not isinstance(rows, list) or not rows:
        raise DatasetError(f"{path}: expected a non-empty JSON list of items")
    tasks = []
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("item_id"), str):
            raise DatasetError(f"{path}: item {row!r} has no string item_id")
        name, idx = parse_item_id(row["item_id"])
        if env is not None and name != env:
            raise DatasetError(f"{path}: item {row['item_id']!r} is not an {env!r} task")
        reference = row.get("reference")
        if reference is not None and not isinstance(reference, str):
            raise DatasetError(f"{path}: item {row['item_id']!r}: reference must be a string")
        tasks.append(Task(row["item_id"], name, idx, row.get("category"), reference))
    return tasks


def _file_rows(path: str | Path) -> object:
    try:
        return json.loads(shipped_path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DatasetError(f"{path}: {e}") from None


def _declared_rows(split: str, env: str | None, seed: int) -> object:
    if env is None:
        raise DatasetError(f"split {split!r} names no file: a split by name needs its env")
    try:
        return split_rows(env, split, seed)
    except (LookupError, ImportError) as e:
        raise DatasetError(f"split {split!r} of env {env!r}: {e}") from None


class TaskSource:
    """Epoch-aware iterator over tasks; `cursor` is the resume point."""

    def __init__(
        self,
        tasks: Sequence[Task],
        *,
        seed: int = 0,
        shuffle: bool = True,
        cursor: Cursor = Cursor(),
        epochs: int | None = None,
    ) -> None:
        if not tasks:
            raise DatasetError("no tasks")
        if cursor.epoch < 0 or not 0 <= cursor.index <= len(tasks):
            raise DatasetError(f"cursor {cursor} is outside a split of {len(tasks)} tasks")
        self.tasks = list(tasks)
        self.seed = seed
        self.shuffle = shuffle
        self.epochs = epochs
        self._epoch = cursor.epoch
        self._index = cursor.index
        self._order = self.order(cursor.epoch)

    def order(self, epoch: int) -> list[int]:
        """Task indices of `epoch`, a pure function of (seed, epoch)."""
        order = list(range(len(self.tasks)))
        if self.shuffle:
            random.Random(f"agentgym-rl/{self.seed}/{epoch}").shuffle(order)
        return order

    @property
    def cursor(self) -> Cursor:
        return Cursor(self._epoch, self._index)

    @property
    def exhausted(self) -> bool:
        return self.epochs is not None and self._epoch >= self.epochs

    def next(self) -> Task | None:
        """The next task, or None once `epochs` passes are done."""
        if self._index >= len(self.tasks):
            self._epoch, self._index = self._epoch + 1, 0
            self._order = self.order(self._epoch)
        if self.exhausted:
            return None
        task = self.tasks[self._order[self._index]]
        self._index += 1
        return task

    def __iter__(self) -> Iterator[Task]:
        while (task := self.next()) is not None:
            yield task


@dataclass(frozen=True, slots=True)
class MixCursor:
    """Position of a `TaskMix`: draws made so far and each source's cursor."""

    draws: int = 0
    sources: tuple[Cursor, ...] = field(default_factory=tuple)


class TaskMix:
    """Tasks of several sources, each drawn with probability proportional to its weight."""

    def __init__(
        self,
        sources: Sequence[TaskSource],
        weights: Sequence[float],
        *,
        seed: int = 0,
        draws: int = 0,
    ) -> None:
        if not sources or len(sources) != len(weights) or min(weights) <= 0:
            raise DatasetError(f"a mix needs sources with positive weights, got {list(weights)}")
        self.sources, self.weights, self.seed, self._draws = (
            list(sources),
            list(weights),
            seed,
            draws,
        )

    @property
    def cursor(self) -> MixCursor:
        return MixCursor(self._draws, tuple(s.cursor for s in self.sources))

    @property
    def exhausted(self) -> bool:
        return all(s.exhausted for s in self.sources)

    def next(self) -> Task | None:
        """The next drawn task, or None once every source is exhausted."""
        while not self.exhausted:
            live = [i for i, s in enumerate(self.sources) if not s.exhausted]
            rng = random.Random(f"agentgym-rl/{self.seed}/mix/{self._draws}")
            pick = rng.choices(live, weights=[self.weights[i] for i in live])[0]
            self._draws += 1
            task = self.sources[pick].next()
            if task is not None:
                return task
        return None

    def __iter__(self) -> Iterator[Task]:
        while (task := self.next()) is not None:
            yield task
