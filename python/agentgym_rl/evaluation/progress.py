"""The eval progress bar: episodes done of total, running success rate, env failures, elapsed
time (rich).

Contract: `with EvalProgress(total, enabled=...) as bar:` shows a bar on stderr; `bar.add(record)`
counts one finished episode. An episode that ended as an env failure is counted on the bar
(`env failures N: <latest reason>`), and each new reason (the first `MAX_PRINTED`) is printed
in full above it, so a broken env server is visible while the evaluation runs, not as a silent
0%. Disabled, it counts without drawing or printing (tests, `--no-progress`).
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agentgym_rl.episode.scoring import ENV_FAILURE, NO_REASON, EvalRecord

MAX_PRINTED = 5
"""Distinct env-failure reasons printed above the bar (the rest are only counted)."""
SHORT_REASON = 80
"""Characters of the latest reason shown on the bar itself."""


class EvalProgress:
    """Counts finished episodes and draws them; see the module docstring."""

    def __init__(self, total: int, *, enabled: bool = True, console: Console | None = None) -> None:
        self.total = total
        self.done = 0
        self.successes = 0
        self.env_failures = 0
        self.reasons: set[str] = set()
        self.enabled = enabled
        self._progress = Progress(
            TextColumn("eval"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("success {task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[failures]}"),
            console=console or Console(stderr=True),
            disable=not enabled,
        )
        self._task = self._progress.add_task("episodes", total=total, rate="-", failures="")

    def add(self, record: EvalRecord) -> None:
        self.done += 1
        self.successes += int(record.success)
        rate = f"{100 * self.successes / self.done:.1f}%"
        failures = None
        if record.status == ENV_FAILURE:
            self.env_failures += 1
            reason = record.failure or NO_REASON
            if reason not in self.reasons:
                self.reasons.add(reason)
                if self.enabled and len(self.reasons) <= MAX_PRINTED:
                    self._progress.console.print(f"env failure: {escape(reason)}", soft_wrap=True)
            short = reason if len(reason) <= SHORT_REASON else reason[: SHORT_REASON - 1] + "…"
            failures = escape(f"env failures {self.env_failures}: {short}")
        if failures is None:
            self._progress.update(self._task, advance=1, rate=rate)
        else:
            self._progress.update(self._task, advance=1, rate=rate, failures=failures)

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
