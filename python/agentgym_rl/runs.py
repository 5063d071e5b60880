"""A run's records from Python: `agentgym_rl.runs.open(run_dir)`.

Contract: `open(run_dir)` reads a `train` run folder (or a `serve-rollouts` / `learn` log dir)
as it is now, finished or not: `metrics` (the learner's record per step), `rollout` (each
rollout server's periodic records), `evals` (held-out evaluations), `held_out()` (success by
policy version, over servers) and `episodes()` (the episode log `agentgym-rl show` prints, as
`EpisodeRecord`s). `frame(name)` gives one of the record lists as a pandas DataFrame when
pandas is installed. Nothing is cached: call `open` again to see newer records.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentgym_rl.episode.log import EpisodeRecord, find_episode_log, read_episodes
from agentgym_rl.report.records import RunRecords


@dataclass(frozen=True)
class Run:
    """The records of one run folder (see the module docstring)."""

    run_dir: Path
    records: RunRecords

    @property
    def metrics(self) -> list[dict[str, Any]]:
        return self.records.learn

    @property
    def rollout(self) -> dict[str, list[dict[str, Any]]]:
        return self.records.rollout

    @property
    def evals(self) -> list[dict[str, Any]]:
        return self.records.eval

    def held_out(self) -> list[tuple[int, float]]:
        """(policy version, held-out success) in version order."""
        return self.records.eval_by_version()

    def episodes(self) -> Iterator[EpisodeRecord]:
        """The run's logged episodes in file order (`EpisodeLogError` when it has none)."""
        return read_episodes(find_episode_log(self.run_dir))

    def frame(self, name: Literal["metrics", "evals"] = "metrics") -> Any:
        """`metrics` or `evals` as a pandas DataFrame (ImportError without pandas)."""
        import pandas  # an optional dependency: only this method needs it

        return pandas.DataFrame(self.metrics if name == "metrics" else self.evals)


def open(run_dir: str | Path) -> Run:  # shadows the builtin here only: read as `runs.open`
    """The records of `run_dir` (FileNotFoundError when it is not a folder)."""
    path = Path(run_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such run folder")
    return Run(path, RunRecords.load(path))


__all__ = ["Run", "open"]
