"""A run's records as the scalars people know, in TensorBoard (read back with TensorBoard's own
reader) and in an offline Weights & Biases run (read back from its record file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agentgym_rl.metric_sinks.tensorboard import TensorBoardLog
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
        {
            "step": 2,
            "loss": 0.25,
            "approx_kl": 0.02,
            "reward_mean": 0.4,
            "lr": 1e-3,
            "adv_by_turn": {"1": -0.25, "2": 0.5},
            "step_group_share_by_turn": {"1": 1.0, "2": 0.25},
        },
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
    RunWatcher(tmp_path, max_steps=2, sinks=[log], eval_env="babyai").poll()
    log.close()
    found = scalars(tmp_path)
    assert found["actor/loss"] == [(1, 0.5), (2, 0.25)]
    assert [s for s, _ in found["actor/kl"]] == [1, 2] and found["actor/clip_frac"] == [(1, 0.1)]
    assert found["perf/tokens_per_s"] == [(1, 900.0)] and found["train/reward_mean"] == [(2, 0.4)]
    assert found["train/success"] == [(1, 0.25)] and found["perf/gen_tokens_per_s"] == [(1, 300.0)]
    assert found["eval/babyai/success"] == [(0, 0.4)]
    assert found["eval/babyai/GoToObj/success"] == [(0, 0.3)]
    assert found["eval/pass"] == [(0, 0.5)]
    assert found["credit/advantage_turn1"] == [(2, -0.25)]
    assert found["credit/advantage_turn2"] == [(2, 0.5)]
    assert found["credit/step_group_share_turn2"] == [(2, 0.25)]

    # a resumed run's watcher replays every record: the new log replaces the old, no doubles
    log = TensorBoardLog(tmp_path)
    RunWatcher(tmp_path, max_steps=2, sinks=[log], eval_env="babyai").poll()
    log.close()
    assert scalars(tmp_path)["actor/loss"] == [(1, 0.5), (2, 0.25)]
    assert len(list((tmp_path / "tensorboard").iterdir())) == 1


def wandb_history(run_dir: Path) -> list[dict[str, Any]]:
    """The history rows of the offline W&B run under `run_dir`, read from its `.wandb` file (a
    LevelDB-style log of protobuf records: 7-byte file header, 32 KiB blocks, each record a
    7-byte header, then FULL or FIRST/MIDDLE/LAST pieces)."""
    from wandb.proto import wandb_internal_pb2 as pb

    [path] = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    pos, pending, raw = 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        piece, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 2):
            pending = piece
        elif kind in (3, 4):
            pending += piece
        if kind in (1, 4):
            raw.append(pending)
    rows = []
    for blob in raw:
        record = pb.Record()
        record.ParseFromString(blob)
        if record.HasField("history"):
            items = record.history.item
            rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items})
    return rows


@pytest.mark.process  # W&B runs its own service process
def test_records_reach_an_offline_wandb_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    from agentgym_rl.metric_sinks.wandb_run import WandbRun

    monkeypatch.setenv("WANDB_SILENT", "true")
    _append(
        tmp_path / "learn" / "metrics.jsonl",
        {"step": 1, "loss": 0.5, "approx_kl": 0.01},
        {"step": 2, "loss": 0.25, "approx_kl": 0.02},
    )
    _append(tmp_path / "rollout-0" / "metrics.jsonl", {"version": 1, "success_rate": 0.25})
    _append(tmp_path / "rollout-0" / "eval.jsonl", {"version": 0, "success": 0.4})
    run = WandbRun(tmp_path, project="agentgym-rl-test", mode="offline", config={"seed": 0})
    RunWatcher(tmp_path, max_steps=2, sinks=[run], eval_env="babyai").poll()
    run.close()
    # finish() can return before W&B's service process has written the last records (CI once
    # read an empty history); its teardown waits for that process, as a program's exit does
    import wandb

    wandb.teardown()
    rows = wandb_history(tmp_path)
    learner = [(r["train/step"], r["actor/loss"]) for r in rows if "actor/loss" in r]
    assert learner == [(1, 0.5), (2, 0.25)]
    assert [(r["train/step"], r["train/success"]) for r in rows if "train/success" in r] == [
        (1, 0.25)
    ]
    evals = [(r["eval/version"], r["eval/babyai/success"]) for r in rows if "eval/version" in r]
    assert evals == [(0, 0.4)]
