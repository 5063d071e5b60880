"""A run's metrics as TensorBoard scalars, under the names verl and TRL users know.

Contract: `TensorBoardLog(run_dir)` writes a new event file in `run_dir/tensorboard/` (open it
with `tensorboard --logdir RUN_DIR/tensorboard`, or a parent of many runs). `learner(record)`,
`rollout(record, server, step)` and `evaluation(record, env)` write one record of
`learn/metrics.jsonl`, `rollout-*/metrics.jsonl` (at the learner step it belongs to) and
`rollout-*/eval.jsonl` (at its policy version) as the scalars `LEARNER_TAGS`, `ROLLOUT_TAGS` and
`eval_scalars` name; keys a record lacks are skipped. Scalars are flushed every few seconds and
at `close()`. The mapping is pure; the supervisor feeds every record of the run as it arrives
(`supervise/progress.py`), from the start on a resume, so a new log replaces the old files.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentgym_rl.report.records import number

LEARNER_TAGS = {
    "reward_mean": "train/reward_mean",
    "loss": "actor/loss",
    "pg_loss": "actor/pg_loss",
    "approx_kl": "actor/kl",
    "kl_ref": "actor/kl_ref",
    "clip_frac": "actor/clip_frac",
    "grad_norm": "actor/grad_norm",
    "lr": "actor/lr",
    "mismatch_kl": "actor/mismatch_kl",
    "tis_weight_mean": "actor/tis_weight_mean",
    "tokens_per_s": "perf/tokens_per_s",
    "step_s": "perf/step_s",
    "groups_used": "buffer/groups_used",
    "groups_dropped": "buffer/groups_dropped",
    "groups_rejected": "buffer/groups_rejected",
}
"""A learner record's key -> its tag (at the record's step)."""

ROLLOUT_TAGS = {
    "success_rate": "train/success",
    "reward_mean": "rollout/reward_mean",
    "turns_mean": "train/turns_mean",
    "generated_tokens_per_s": "perf/gen_tokens_per_s",
    "env_steps_per_s": "perf/env_steps_per_s",
    "episodes_per_s": "perf/episodes_per_s",
    "engine_idle_ratio": "perf/engine_idle_ratio",
}
"""A rollout server's record key -> its tag (at the learner step the record belongs to)."""


def learner_scalars(record: dict[str, Any]) -> Iterator[tuple[str, float]]:
    for key, tag in LEARNER_TAGS.items():
        value = number(record, key)
        if value is not None:
            yield tag, value


def rollout_scalars(record: dict[str, Any], server: str) -> Iterator[tuple[str, float]]:
    """`server`'s figures; with more than one server each gets its own tag (`.../rollout-1`)."""
    suffix = "" if server == "rollout-0" else f"/{server}"
    for key, tag in ROLLOUT_TAGS.items():
        value = number(record, key)
        if value is not None:
            yield tag + suffix, value


def eval_scalars(record: dict[str, Any], env: str) -> Iterator[tuple[str, float]]:
    """Held-out success of `env` overall (`eval/<env>/success`, also `eval/success` and
    `eval/pass`) and per category (`eval/<env>/<category>/success`) from an `eval.jsonl`
    record."""
    for key, tag in (("success", "eval/success"), ("pass", "eval/pass")):
        value = number(record, key)
        if value is not None:
            yield tag, value
            if key == "success":
                yield f"eval/{env}/success", value
    categories = record.get("by_category")
    for category, value in (categories if isinstance(categories, dict) else {}).items():
        if isinstance(value, int | float):
            yield f"eval/{env}/{category}/success", float(value)


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


__all__ = ["LEARNER_TAGS", "ROLLOUT_TAGS", "TensorBoardLog", "eval_scalars", "learner_scalars"]
