"""The eval progress bar: episodes done of total, running success rate, env failures, elapsed
time (rich).

Contract: `with EvalProgress(total, enabled=...) as bar:` shows a bar on stderr; `bar.add(record)`
counts one finished episode. Where stderr is not a terminal (a log file, a pipe), where a bar
cannot redraw, finished episodes print lines instead (the first, then at most one a second, and
the last). An episode that ended as an env failure is counted on the bar
(`env failures N: <latest reason>`), and each new reason (the first `MAX_PRINTED`) is printed
in full above it, so a broken env server is visible while the evaluation runs, not as a silent
0%. Once `RUNAWAY_AFTER` episodes are in, if most of their turns ran to the token cap without a
parsable action, it warns once: the model does not stop, and each turn costs the whole cap.
Disabled, it counts without drawing or printing (tests, `--no-progress`).
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agentgym_rl.episode.scoring import ENV_FAILURE, NO_REASON, EvalRecord

MAX_PRINTED = 5
"""Distinct env-failure reasons printed above the bar (the rest are only counted)."""
SHORT_REASON = 80
"""Characters of the latest reason shown on the bar itself."""
RUNAWAY_AFTER = 4
"""Episodes counted before the runaway-turn warning may fire."""
LINE_EVERY_S = 1.0
"""Without a terminal: the least time between two progress lines."""


class EvalProgress:
    """Counts finished episodes and draws them; see the module docstring."""

    def __init__(self, total: int, *, enabled: bool = True, console: Console | None = None) -> None:
        self.total = total
        self.done = 0
        self.successes = 0
        self.env_failures = 0
        self.reasons: set[str] = set()
        self.enabled = enabled
        self.turns = 0
        self.runaway_turns = 0
        self.warned = False
        self._t0 = time.monotonic()
        self._last_line = float("-inf")  # the first episode prints
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
        self._lines = enabled and not self._progress.console.is_terminal

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
        self._count_runaways(record)
        now = time.monotonic()
        if self._lines and (now - self._last_line >= LINE_EVERY_S or self.done == self.total):
            self._last_line = now
            line = (
                f"eval: {self.done}/{self.total} episodes, success {rate}, {now - self._t0:.0f} s"
            )
            extra = f", env failures {self.env_failures}" if self.env_failures else ""
            self._progress.console.print(line + extra, soft_wrap=True, highlight=False)

    def _count_runaways(self, record: EvalRecord) -> None:
        if record.turns is None or record.runaway_turns is None:
            return
        self.turns += record.turns
        self.runaway_turns += record.runaway_turns
        counted = self.done - self.env_failures
        if self.warned or counted < RUNAWAY_AFTER or 2 * self.runaway_turns <= self.turns:
            return
        self.warned = True
        if self.enabled:
            self._progress.console.print(
                f"warning: {self.runaway_turns} of {self.turns} turns so far ran to "
                "max_tokens_per_turn without a parsable action: the model does not stop, and "
                "each such turn costs the whole cap (a smaller --max-tokens-per-turn, or a "
                "model with the format warm-up: `agentgym-rl init-model`)",
                soft_wrap=True,
                highlight=False,
            )

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
