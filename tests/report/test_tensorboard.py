"""A run's records as TensorBoard scalars, read back with TensorBoard's own reader."""

from __future__ import annotations

import json
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agentgym_rl.report.tensorboard import TensorBoardLog
from agentgym_rl.supervise.progress import RunWatcher


def _append(path: Path, *records: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return {
        tag: [(e.step, round(e.value, 6)) for e in events.Scalars(tag)]  # stored as float32
        for tag in events.Tags()["scalars"]
    }


def test_records_become_the_scalars_people_know(tmp_path: Path) -> None:
    _append(
        tmp_path / "learn" / "metrics.jsonl",
        {"step": 1, "loss": 0.5, "approx_kl": 0.01, "clip_frac": 0.1, "tokens_per_s": 900.0},
        {"step": 2, "loss": 0.25, "approx_kl": 0.02, "reward_mean": 0.4, "lr": 1e-3},
    )
    _append(
        tmp_path / "rollout-0" / "metrics.jsonl",
        {"version": 1, "success_rate": 0.25, "generated_tokens_per_s": 300.0, "turns_mean": 3.5},
    )
    _append(
        tmp_path / "rollout-0" / "eval.jsonl",
        {"version": 0, "success": 0.4, "pass": 0.5, "by_category": {"GoToObj": 0.3}},
    )
    log = TensorBoardLog(tmp_path)
    RunWatcher(tmp_path, max_steps=2, sink=log, eval_env="babyai").poll()
    log.close()
    found = scalars(tmp_path)
    assert found["actor/loss"] == [(1, 0.5), (2, 0.25)]
    assert [s for s, _ in found["actor/kl"]] == [1, 2] and found["actor/clip_frac"] == [(1, 0.1)]
    assert found["perf/tokens_per_s"] == [(1, 900.0)] and found["train/reward_mean"] == [(2, 0.4)]
    assert found["train/success"] == [(1, 0.25)] and found["perf/gen_tokens_per_s"] == [(1, 300.0)]
    assert found["eval/babyai/success"] == [(0, 0.4)]
    assert found["eval/babyai/GoToObj/success"] == [(0, 0.3)]
    assert found["eval/pass"] == [(0, 0.5)]

    # a resumed run's watcher replays every record: the new log replaces the old, no doubles
    log = TensorBoardLog(tmp_path)
    RunWatcher(tmp_path, max_steps=2, sink=log, eval_env="babyai").poll()
    log.close()
    assert scalars(tmp_path)["actor/loss"] == [(1, 0.5), (2, 0.25)]
    assert len(list((tmp_path / "tensorboard").iterdir())) == 1
