"""The progress of `init-model`: its messages and a warm-up bar (rich).

Contract: `with WarmupProgress(steps) as shown:` draws a bar of warm-up steps with the latest
loss; `shown.say(text)` prints a line above it and `shown.on_step(step, loss)` advances it (the
two callbacks `init_policy` takes). Where the console is not a terminal (a log file), a line is
printed every tenth of the steps instead of redrawing.
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn


class WarmupProgress:
    """Messages and the warm-up bar of one `init_policy` call."""

    def __init__(self, steps: int, console: Console | None = None) -> None:
        self.steps = steps
        self.console = console or Console()
        self._every = max(1, steps // 10)
        self._started = time.perf_counter()
        self._progress = Progress(
            TextColumn("warm-up"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} loss {task.fields[loss]:.3f}"),
            TimeRemainingColumn(),
            console=self.console,
        )
        self._bar = self._progress.add_task("warm-up", total=steps, loss=float("nan"))

    def say(self, text: str) -> None:
        self.console.print(text)

    def on_step(self, step: int, loss: float) -> None:
        self._progress.update(self._bar, completed=step, loss=loss)
        if not self.console.is_terminal and step % self._every == 0:
            elapsed = time.perf_counter() - self._started
            self.say(f"warm-up step {step}/{self.steps} loss {loss:.3f} ({elapsed:.0f} s)")

    def __enter__(self) -> WarmupProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._progress.stop()
