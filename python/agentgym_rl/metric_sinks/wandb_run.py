"""A run's scalars in Weights & Biases, when it is installed and the train config asks for it.

Contract: `WandbRun(run_dir, project=..., mode="offline" | "online", ...)` is a `MetricSink`
(`scalars.py`) over one W&B run whose files live in `run_dir/wandb/` (offline: sync later with
`wandb sync`), its config the run's train config. Learner and rollout scalars are plotted
against `train/step` (the learner step or the version a rollout server ran), evaluations against
`eval/version`, so records that arrive out of order keep their place. Each `train` invocation
is a W&B run of its own holding every record so far (the feeder replays them on a resume).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from agentgym_rl.metric_sinks.scalars import eval_scalars, learner_scalars, rollout_scalars
from agentgym_rl.report.records import number


class WandbRun:
    """One W&B run fed as a `MetricSink` (see the module docstring)."""

    def __init__(
        self,
        run_dir: Path,
        *,
        project: str,
        mode: Literal["offline", "online"] = "offline",
        entity: str | None = None,
        name: str | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        import wandb

        run_dir.mkdir(parents=True, exist_ok=True)
        self._run = wandb.init(
            project=project,
            entity=entity,
            name=name or run_dir.resolve().name,
            mode=mode,
            dir=str(run_dir),
            config=config or {},
        )
        for prefix in ("actor", "train", "perf", "buffer", "rollout"):
            self._run.define_metric(f"{prefix}/*", step_metric="train/step")
        self._run.define_metric("eval/*", step_metric="eval/version")

    def learner(self, record: dict[str, Any]) -> None:
        step = number(record, "step")
        if step is not None:
            self._log(learner_scalars(record), "train/step", int(step))

    def rollout(self, record: dict[str, Any], server: str, step: int) -> None:
        self._log(rollout_scalars(record, server), "train/step", step)

    def evaluation(self, record: dict[str, Any], env: str) -> None:
        version = number(record, "version")
        if version is not None:
            self._log(eval_scalars(record, env), "eval/version", int(version))

    def _log(self, scalars: Iterator[tuple[str, float]], axis: str, at: int) -> None:
        values: dict[str, float] = dict(scalars)
        if values:
            self._run.log({axis: at, **values})

    def close(self) -> None:
        self._run.finish()


__all__ = ["WandbRun"]
