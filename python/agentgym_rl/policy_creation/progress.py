"""The progress of `init-model`: its messages and a warm-up bar (rich).

Contract: `with WarmupProgress(steps) as shown:` draws a bar of warm-up steps with the latest
loss; `shown.say(text)` prints a line above it and `shown.on_step(step, loss)` advances it (the
two callbacks `init_policy` takes). Where the console is not a terminal (a log file), a line is
printed every tenth of the steps instead of redrawing (`step_lines`, which a stage without a bar,
the read-and-copy pre-training, uses alone).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn


def step_lines(stage: str, steps: int, say: Callable[[str], None]) -> Callable[[int, float], None]:
    """An `on_step` callback that says `<stage> step k/steps loss x (elapsed)` every tenth step."""
    every, started = max(1, steps // 10), time.perf_counter()

    def on_step(step: int, loss: float) -> None:
        if step % every == 0:
            elapsed = time.perf_counter() - started
            say(f"{stage} step {step}/{steps} loss {loss:.3f} ({elapsed:.0f} s)")

    return on_step


class WarmupProgress:
    """Messages and the warm-up bar of one `init_policy` call."""

    def __init__(self, steps: int, console: Console | None = None) -> None:
        self.steps = steps
        self.console = console or Console()
        self._lines = step_lines("warm-up", steps, self.say)
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
        if not self.console.is_terminal:
            self._lines(step, loss)

    def __enter__(self) -> WarmupProgress:
        if self.steps:  # a pretrained base without a warm-up draws no bar
            self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._progress.stop()
