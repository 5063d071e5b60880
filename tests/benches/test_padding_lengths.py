"""The padding bench's real lengths: what `--save-real` keeps of a run (complete training groups,
learner-usable samples, in the order they finished) and how the record becomes steps."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))

import bench_padding  # benches/ is not a package: found on the path above

pytestmark = pytest.mark.unit


def _episode(group: int, n: int, split: str = "train", status: str = "done") -> str:
    row = {"group_id": group, "split": split, "status": status, "input_ids": [1] * n}
    return json.dumps(row)


def test_save_real_keeps_complete_training_groups_of_usable_samples(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "rollout-0").mkdir(parents=True)
    lines = [_episode(7, 100 + i) for i in range(7)]
    lines += [_episode(7, 300, status="aborted")]  # completes group 7; not a learner sample
    lines += [_episode(9, 50 + i) for i in range(8)]  # a complete group, finished second
    lines += [_episode(11, 80) for _ in range(3)]  # incomplete: left out
    lines += [_episode(13, 90, split="held_out") for _ in range(8)]  # held-out: left out
    (run / "rollout-0" / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "lengths.json"

    bench_padding.save_real(run, out)

    record = json.loads(out.read_text())
    assert record["groups"] == [list(range(100, 107)), list(range(50, 58))]
    assert record["group_size"] == 8


def test_real_steps_are_six_groups_and_their_cut_reads_lengths(tmp_path: Path) -> None:
    path = tmp_path / "lengths.json"
    groups = [[10 * (g + 1)] * 8 for g in range(13)]
    path.write_text(json.dumps({"groups": groups}))
    steps = bench_padding.real_steps(path)
    assert steps == [groups[:6], groups[6:12]]  # the partial 13th group left out
    wire = bench_padding.length_groups(steps[0])
    assert [[len(s.tokens) for s in g.samples] for g in wire] == steps[0]
