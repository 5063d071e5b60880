"""A drawn task held until the buffer takes it, and the dataset cursor that does not lose it.

Contract: `PendingTasks(source)` draws through `source` (a `TaskSource`, `TaskMix` or
`Curriculum`). `take()` returns the task put back last, else the source's next (None once it
is exhausted); `put_back(task)` holds a task the buffer refused for the next `take()`.
`exhausted`: nothing held and the source exhausted. `cursor` is where a restarted run resumes
the dataset: with a task held, the source's cursor from before that task was drawn (a stop
leaves it unplayed, so the next run draws it again; with a curriculum, its draw counter stays
where it was), else the source's. Both loops admit through it (`Dispatcher`, `SyncLoop`) and
the rollout service saves its cursor at exit.
"""

from __future__ import annotations

from agentgym_rl.episode.dataset import Cursor, MixCursor, Task
from agentgym_rl.rollout.curriculum import Tasks


class PendingTasks:
    def __init__(self, source: Tasks) -> None:
        self.source = source
        self._held: Task | None = None
        self._before: Cursor | MixCursor | None = None  # the source's cursor before the held task
        self._drawn_at: Cursor | MixCursor | None = None  # ... before the last draw

    @property
    def exhausted(self) -> bool:
        return self._held is None and self.source.exhausted

    @property
    def cursor(self) -> Cursor | MixCursor:
        if self._held is not None and self._before is not None:
            return self._before
        return self.source.cursor

    def take(self) -> Task | None:
        if self._held is not None:
            task, self._held = self._held, None
            return task
        self._drawn_at = self.source.cursor
        return self.source.next()

    def put_back(self, task: Task) -> None:
        self._held, self._before = task, self._drawn_at
