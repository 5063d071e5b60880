"""Avg@n / Pass@n math and the per-env, per-category table from plain records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgym_rl.episode.scoring import EvalRecord, avg_pass, summarize


def test_avg_and_pass_by_hand() -> None:
    # task A: 1 of 4, task B: 0 of 4, task C: 4 of 4
    per_task = [[True, False, False, False], [False] * 4, [True] * 4]
    avg, passed = avg_pass(per_task)
    assert avg == pytest.approx((0.25 + 0.0 + 1.0) / 3)
    assert passed == pytest.approx(2 / 3)


def test_avg_weights_tasks_equally_when_sample_counts_differ() -> None:
    # the mean over tasks, not over samples: 1/1 and 0/3 -> 0.5 (samples would give 0.25)
    assert avg_pass([[True], [False, False, False]]) == (0.5, 0.5)
    assert avg_pass([]) == (0.0, 0.0)
    assert avg_pass([[]]) == (0.0, 0.0)


def test_rows_per_category_env_and_overall_from_tuples(tmp_path: Path) -> None:
    records = [
        ("babyai", "GoTo", "babyai_1", True, 1.0),
        ("babyai", "GoTo", "babyai_1", False, 0.0),
        ("babyai", "GoTo", "babyai_2", False, 0.0),
        ("babyai", "GoTo", "babyai_2", False, 0.0),
        ("babyai", "Pickup", "babyai_3", True, 0.8, "done"),
        ("babyai", "Pickup", "babyai_3", True, 0.6, "done"),
        ("textcraft", None, "textcraft_7", False, 0.0, "turn_cap"),
        ("textcraft", None, "textcraft_7", False, 0.0, "turn_cap"),
    ]
    report = summarize(records, {"policy": "test"})
    assert report.n == 2
    keys = [(r.env, r.category) for r in report.rows]
    assert keys == [
        ("babyai", "GoTo"),
        ("babyai", "Pickup"),
        ("babyai", "all"),
        ("textcraft", "-"),
        ("textcraft", "all"),
        ("all", "all"),
    ]
    goto = report.row("babyai", "GoTo")
    assert (goto.tasks, goto.samples, goto.avg, goto.pass_) == (2, 4, 0.25, 0.5)
    babyai = report.row("babyai")
    assert babyai.avg == pytest.approx((0.5 + 0.0 + 1.0) / 3)
    assert babyai.pass_ == pytest.approx(2 / 3)
    assert babyai.mean_reward == pytest.approx(2.4 / 6)
    overall = report.row("all")
    assert (overall.tasks, overall.samples) == (4, 8)
    assert overall.pass_ == pytest.approx(0.5)

    md_path, json_path = report.write(tmp_path / "out")
    md = md_path.read_text().splitlines()
    # one table per env, each under its name, then the overall line
    assert md[:4] == [
        "### babyai",
        "",
        "| env | category | tasks | Avg@2 | Pass@2 | mean reward |",
        "|---|---|---:|---:|---:|---:|",
    ]
    assert md[4] == "| babyai | GoTo | 2 | 25.0 | 50.0 | 0.250 |"
    assert md.index("### textcraft") == 8 and md[-1].startswith("**all envs**: 4 tasks, Avg@2")
    data = json.loads(json_path.read_text())
    assert data["meta"] == {"policy": "test"}
    assert data["rows"][0]["pass"] == 0.5 and len(data["episodes"]) == 8
    assert data["statuses"] == {"done": 2, "turn_cap": 2}


def test_single_env_has_no_overall_row_and_records_pass_through() -> None:
    rec = EvalRecord("babyai", "GoTo", "babyai_1", True, 1.0)
    report = summarize([rec])
    assert [(r.env, r.category) for r in report.rows] == [("babyai", "GoTo"), ("babyai", "all")]
    assert report.records == [rec]
    with pytest.raises(ValueError, match="expected \\(env, category, item_id"):
        summarize([("babyai", "babyai_1", True)])
