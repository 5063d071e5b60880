"""A run's standing, read from its folder: what `agentgym-rl status` prints.

Contract: `RunStatus(run_dir)` (raises `FileNotFoundError` when the folder holds no run: no
`configs/train.yaml`) reads the run's records without writing any: `header()` names the run and,
for a launched one, its scheduler and job (`launch.json`); `line()` is the learner's step out of
`max_steps` and the progress line `train` shows; `starts()` one line per start of the run that
ended (`run.jsonl`); `ended()` is true once the newest start ended for good (finished, crashed,
or stopped and not waiting for a requeue).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from agentgym_rl.report.records import read_jsonl
from agentgym_rl.supervise.progress import RunWatcher


class RunStatus:
    """The standing of the run in `run_dir` (see the module contract)."""

    def __init__(self, run_dir: Path) -> None:
        config = run_dir / "configs" / "train.yaml"
        if not config.is_file():
            raise FileNotFoundError(f"{config} not found: {run_dir} is not a run folder")
        self.run_dir = run_dir
        train = yaml.safe_load(config.read_text()) or {}
        self.max_steps = int((train.get("learn") or {}).get("max_steps") or 0)
        self.launch: dict[str, Any] = {}
        if (run_dir / "launch.json").is_file():
            self.launch = json.loads((run_dir / "launch.json").read_text())
        self.watcher = RunWatcher(run_dir, self.max_steps, timeline=False)

    def header(self) -> str:
        if not self.launch:
            return f"run {self.run_dir} (train on one machine)"
        job = self.launch.get("job_id") or "not submitted (dry run)"
        return f"run {self.run_dir}: {self.launch.get('scheduler')} job {job}"

    def line(self) -> str:
        state = self.watcher.poll()
        progress = state.line()
        return f"step {state.step}/{self.max_steps}" + (f"  {progress}" if progress else "")

    def starts(self) -> list[str]:
        lines = []
        for i, record in enumerate(read_jsonl(self.run_dir / "run.jsonl")):
            start = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.get("start", 0)))
            minutes = (record.get("end", 0) - record.get("start", 0)) / 60
            resumed = " (resumed)" if record.get("resume") else ""
            lines.append(
                f"start {i + 1}{resumed} at {start}: {record.get('outcome')} after "
                f"{minutes:.1f} min, at step {record.get('step')}"
            )
        return lines

    def ended(self) -> bool:
        records = read_jsonl(self.run_dir / "run.jsonl")
        if not records:
            return False
        last = records[-1]
        requeued = last.get("outcome") == "SIGUSR1" and self.launch.get("scheduler") == "slurm"
        after_launch = last.get("end", 0) >= self.launch.get("time", 0)
        return after_launch and not requeued
