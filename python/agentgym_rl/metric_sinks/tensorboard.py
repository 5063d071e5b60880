"""A run's scalars as TensorBoard event files: `tensorboard --logdir RUN_DIR/tensorboard`.

Contract: `TensorBoardLog(run_dir)` is a `MetricSink` (`scalars.py`) writing a new event file in
`run_dir/tensorboard/`; the event files of an earlier invocation are removed first, since the
feeder replays every record of the run. Scalars are flushed every few seconds and at `close()`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentgym_rl.metric_sinks.scalars import eval_scalars, learner_scalars, rollout_scalars
from agentgym_rl.report.records import number


class TensorBoardLog:
    """An append-only event file of one run (see the module docstring)."""

    def __init__(self, run_dir: Path, flush_s: float = 5.0) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.dir = run_dir / "tensorboard"
        # whoever feeds this log replays the run's records from the start (a resumed run too):
        # earlier event files would show every point twice
        for old in self.dir.glob("events.out.tfevents.*"):
            old.unlink()
        self._writer = EventFileWriter(str(self.dir), flush_secs=flush_s)

    def learner(self, record: dict[str, Any]) -> None:
        step = number(record, "step")
        if step is not None:
            self._write(int(step), learner_scalars(record), number(record, "time"))

    def rollout(self, record: dict[str, Any], server: str, step: int) -> None:
        self._write(step, rollout_scalars(record, server), number(record, "time"))

    def evaluation(self, record: dict[str, Any], env: str) -> None:
        version = number(record, "version")
        if version is not None:
            self._write(int(version), eval_scalars(record, env), number(record, "time"))

    def _write(self, step: int, scalars: Iterator[tuple[str, float]], wall: float | None) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = [Summary.Value(tag=tag, simple_value=value) for tag, value in scalars]
        if values:
            summary = Summary(value=values)
            event = Event(wall_time=wall or time.time(), step=step, summary=summary)
            self._writer.add_event(event)

    def close(self) -> None:
        self._writer.close()


__all__ = ["TensorBoardLog"]
