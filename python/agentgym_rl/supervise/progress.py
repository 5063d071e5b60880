"""The live view of a run: what the children's JSONL files say, shown as one progress bar.

Contract: `RunWatcher(run_dir)` tails `learn/metrics.jsonl`, `learn/waiting.jsonl` (why the
learner waits, when it does), `rollout-*/metrics.jsonl` and `rollout-*/eval.jsonl` (complete
lines only, from where it last stopped) and keeps the latest state in a `RunState`. Each time
the learner's step changes it appends `{"time", "step"}` to `run_dir/timeline.jsonl`, which
lets the plots place rollout records (timed, not versioned) on the learner-step axis; every
record read also goes to the watcher's metric sinks (TensorBoard, W&B: `metric_sinks/scalars.py`).
`ProgressView`
draws the state as a rich progress bar on a terminal and as a plain line per learner step (at
most every few seconds) otherwise.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from agentgym_rl.metric_sinks.scalars import MetricSink
from agentgym_rl.report.records import json_objects


class JsonlTail:
    """Reads the records appended to one JSONL file since the previous call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next call
        self._offset += end
        return json_objects(data[:end].splitlines())


@dataclass
class RunState:
    """The latest figures of a run."""

    step: int = 0
    max_steps: int = 0
    learner_tokens_per_s: float | None = None
    rollout: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Latest metrics record per rollout server."""
    eval: dict[str, Any] | None = None
    """Latest held-out eval record (highest version)."""
    note: str = ""
    waiting: str = ""
    """Why the learner waits for groups, while it has waited long enough to say so."""

    def _mean(self, key: str) -> float | None:
        values = [r[key] for r in self.rollout.values() if isinstance(r.get(key), int | float)]
        return sum(values) / len(values) if values else None

    def staleness_mean(self) -> float | None:
        hist: dict[int, int] = {}
        for record in self.rollout.values():
            for k, v in (record.get("staleness") or {}).items():
                hist[int(k)] = hist.get(int(k), 0) + int(v)
        total = sum(hist.values())
        return sum(k * v for k, v in hist.items()) / total if total else None

    def line(self) -> str:
        parts = []
        success, reward = self._mean("success_rate"), self._mean("reward_mean")
        if success is not None:
            parts.append(f"success {success:.2f}")
        if reward is not None:
            parts.append(f"reward {reward:.3f}")
        gen = [r.get("generated_tokens_per_s") for r in self.rollout.values()]
        if any(isinstance(g, int | float) for g in gen):
            total = sum(g for g in gen if isinstance(g, int | float))
            parts.append(f"gen tok/s {total:.0f}")
        if self.learner_tokens_per_s is not None:
            parts.append(f"learn tok/s {self.learner_tokens_per_s:.0f}")
        staleness = self.staleness_mean()
        if staleness is not None:
            parts.append(f"staleness {staleness:.2f}")
        if self.eval is not None and isinstance(self.eval.get("success"), int | float):
            parts.append(f"eval@v{self.eval.get('version')} {_eval_figures(self.eval)}")
        if self.waiting:
            parts.append(self.waiting)
        if self.note:
            parts.append(self.note)
        return "  ".join(parts)


def _eval_figures(record: dict[str, Any]) -> str:
    """`0.71`, or each env's success in a mixed run: `babyai 0.71 maze 0.40`."""
    by_env = record.get("by_env")
    if not isinstance(by_env, dict) or len(by_env) < 2:
        return f"{record['success']:.2f}"
    return " ".join(
        f"{env} {figures['success']:.2f}"
        for env, figures in by_env.items()
        if isinstance(figures, dict) and isinstance(figures.get("success"), int | float)
    )


class RunWatcher:
    """Follows the JSONL files of one run directory; every record read also goes to `sinks`
    (`eval_env`: the env the held-out evaluations are of)."""

    def __init__(
        self,
        run_dir: Path,
        max_steps: int,
        sinks: Sequence[MetricSink] = (),
        eval_env: str = "",
        *,
        timeline: bool = True,
    ) -> None:
        self.run_dir = run_dir
        self.timeline = timeline
        """Append learner steps to timeline.jsonl (the supervisor's watcher; a reader's not)."""
        self.sinks = list(sinks)
        self.eval_env = eval_env
        self.state = RunState(max_steps=max_steps)
        self._learn = JsonlTail(run_dir / "learn" / "metrics.jsonl")
        self._waiting = JsonlTail(run_dir / "learn" / "waiting.jsonl")
        self._tails: dict[Path, JsonlTail] = {}

    def _tail(self, path: Path) -> JsonlTail:
        if path not in self._tails:
            self._tails[path] = JsonlTail(path)
        return self._tails[path]

    def poll(self) -> RunState:
        state = self.state
        sinks = self.sinks
        for record in self._learn.read():
            for sink in sinks:
                sink.learner(record)
            step = record.get("step")
            if isinstance(step, int) and step != state.step:
                state.step = step
                if self.timeline:
                    with (self.run_dir / "timeline.jsonl").open("a") as f:
                        f.write(json.dumps({"time": time.time(), "step": step}) + "\n")
            if isinstance(record.get("tokens_per_s"), int | float):
                state.learner_tokens_per_s = float(record["tokens_per_s"])
            state.waiting = ""
        for record in self._waiting.read():
            seconds, reason = record.get("waiting_s") or 0, record.get("reason") or ""
            state.waiting = f"learner waiting {seconds:.0f}s: {reason}" if reason else ""
        for server in sorted(self.run_dir.glob("rollout-*")):
            for record in self._tail(server / "metrics.jsonl").read():
                state.rollout[server.name] = record
                version = record.get("version")
                step = version if isinstance(version, int) else state.step
                for sink in sinks:
                    sink.rollout(record, server.name, step)
            for record in self._tail(server / "eval.jsonl").read():
                for sink in sinks:
                    sink.evaluation(record, self.eval_env)
                version = record.get("version", -1)
                if state.eval is None or version >= state.eval.get("version", -1):
                    state.eval = record
        return state


class ProgressView:
    """A progress bar over learner steps (a plain line per step when not on a terminal)."""

    def __init__(self, max_steps: int, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self._progress: Progress | None = None
        self._task = TaskID(0)
        self._last_step = -1
        self._last_waiting = ""
        self._last_phase = ""
        self._last_print = 0.0
        if self.console.is_terminal:
            self._progress = Progress(
                TextColumn("[bold]train[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[info]}"),
                console=self.console,
                transient=False,
            )
            self._task = self._progress.add_task("train", total=max_steps, info="starting")
            self._progress.start()

    def update(self, state: RunState) -> None:
        info = state.line()
        if self._progress is not None:
            self._progress.update(self._task, completed=state.step, info=info)
            return
        now = time.monotonic()
        changed = state.step != self._last_step or state.waiting != self._last_waiting
        if changed and now - self._last_print >= 5.0:
            self._last_step, self._last_print = state.step, now
            self._last_waiting = state.waiting
            self.console.print(f"train step {state.step}/{state.max_steps}  {info}")

    def phase(self, name: str, detail: str) -> None:
        """What a start-up phase is doing (its child's latest log line): on the bar's line on a
        terminal, otherwise printed when it changes (at most every few seconds)."""
        info = f"{name}: {detail.strip()}" if detail.strip() else name
        if self._progress is not None:
            self._progress.update(self._task, info=info)
            return
        now = time.monotonic()
        if info != self._last_phase and now - self._last_print >= 5.0:
            self._last_phase, self._last_print = info, now
            self.console.print(f"train: {info}", markup=False, highlight=False)

    def message(self, text: str) -> None:
        """A line above the bar (start-up, crashes, shutdown)."""
        self.console.print(text, markup=False, highlight=False)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
