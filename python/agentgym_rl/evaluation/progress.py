"""The eval progress bar: episodes done of total, running success rate, elapsed time (rich).

Contract: `with EvalProgress(total, enabled=...) as bar:` shows a bar on stderr; `bar.add(record)`
counts one finished episode. Disabled, it counts without drawing (tests, `--no-progress`).
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agentgym_rl.evaluation.report import EvalRecord


class EvalProgress:
    """Counts finished episodes and draws them; see the module docstring."""

    def __init__(self, total: int, *, enabled: bool = True) -> None:
        self.total = total
        self.done = 0
        self.successes = 0
        self._progress = Progress(
            TextColumn("eval"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("success {task.fields[rate]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=not enabled,
        )
        self._task = self._progress.add_task("episodes", total=total, rate="-")

    def add(self, record: EvalRecord) -> None:
        self.done += 1
        self.successes += int(record.success)
        rate = f"{100 * self.successes / self.done:.1f}%"
        self._progress.update(self._task, advance=1, rate=rate)

    def __enter__(self) -> EvalProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()
