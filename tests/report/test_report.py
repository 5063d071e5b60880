"""Plots and summaries from synthetic run folders (no processes): every plot is written, the
summary's figures follow from the records, overlays and the `plot` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentgym_rl.report import write_overlay, write_report
from agentgym_rl.report.records import RunRecords
from agentgym_rl.report.summary import summarize

PNG = b"\x89PNG\r\n\x1a\n"
PLOTS = ["eval_success.png", "staleness.png", "success_reward.png", "throughput.png", "turns.png"]


def _jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"torn": ')  # torn tail


def make_run(run: Path, *, gain: float = 0.5) -> Path:
    """Two rollout servers, 4 learner steps, held-out evals at versions 0 and 4; rollout-1
    restarted once (its counters fall back to zero)."""
    _jsonl(
        run / "learn" / "metrics.jsonl",
        [
            {
                "step": s,
                "reward_mean": 0.1 * s,
                "tokens_per_s": 100.0 * s,
                "tokens": 90 * s,
                "loss_tokens": 30 * s,
                "computed_tokens": 100 * s,
            }
            for s in range(1, 5)
        ],
    )
    _jsonl(run / "timeline.jsonl", [{"time": 100.0 + 10 * s, "step": s} for s in range(1, 5)])
    for i, episodes in enumerate(([4, 8, 12, 16], [4, 8, 2, 6])):
        records = [
            {
                "time": 105.0 + 10 * k,
                "episodes": eps,
                "generated_tokens": 100 * eps,
                "generated_tokens_per_s": 50.0,
                "turns_mean": 2.0 + k,
                "success_rate": 0.2 + 0.1 * k,
                "reward_mean": 0.3,
                "staleness": {"0": 2 * (k + 1), "1": k},
            }
            for k, eps in enumerate(episodes)
        ]
        _jsonl(run / f"rollout-{i}" / "metrics.jsonl", records)
        _jsonl(
            run / f"rollout-{i}" / "eval.jsonl",
            [
                {"version": 0, "success": 0.2 + 0.2 * i, "reward_mean": 0.1, "episodes": 10},
                {"version": 4, "success": 0.2 + gain, "reward_mean": 0.5, "episodes": 30},
            ],
        )
    _jsonl(
        run / "run.jsonl",
        [
            {"start": 0.0, "end": 60.0, "outcome": "SIGINT", "exit_code": 130},
            {"start": 100.0, "end": 160.0, "outcome": "finished", "exit_code": 0},
        ],
    )
    return run


def test_records_place_rollout_records_on_learner_steps(tmp_path: Path) -> None:
    run = RunRecords.load(make_run(tmp_path / "run"))
    steps = [run.step_at(r) for r in run.rollout["rollout-0"]]
    assert steps == [0, 1, 2, 3]  # times 105, 115, 125, 135 against steps seen at 110, 120, ...
    assert run.step_at({"time": 999.0, "version": 7}) == 7
    assert run.eval_by_version() == [(0, 0.3), (4, 0.7)]  # episode-weighted over servers
    assert run.counter_total("episodes") == 16 + (8 + 2 + 4)


def test_report_writes_every_plot_and_the_summary(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    written = write_report(run)
    assert sorted(p.name for p in (run / "plots").iterdir()) == PLOTS
    assert all(p.read_bytes().startswith(PNG) for p in (run / "plots").iterdir())
    assert {p.name for p in written} == {*PLOTS, "summary.md", "summary.json"}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 4 and summary["wall_time_s"] == 120.0
    assert summary["base_eval"] == {"version": 0, "success": 0.3}
    assert summary["final_eval"] == {"version": 4, "success": 0.7}
    assert round(summary["eval_gain_points"], 6) == 40.0
    assert summary["episodes"] == 30 and summary["generated_tokens"] == 3000
    assert summary["rollout_tokens_per_s"] == 25.0
    assert summary["learner_tokens_per_s"] == 250.0
    assert summary["learner_token_shares"] == pytest.approx([0.9, 0.3])  # of 1,000 computed
    assert summary["outcome"] == "finished"
    md = (run / "summary.md").read_text()
    assert "| held-out success, final (v4) | 0.700 |" in md
    assert "| gain (points) | +40.0 |" in md
    assert "| learner real / trained tokens of computed | 0.90 / 0.30 |" in md
    assert "![turns](plots/turns.png)" in md
    assert "creating the model" not in md  # this run's model was given


def test_summary_rates_leave_model_creation_out(tmp_path: Path) -> None:
    """The first invocation (0-60 s) spent 40 s creating the model: the wall time stays 120 s,
    the rollout rate is over the 80 s that ran the loop, and the table says how long it took."""
    run = make_run(tmp_path / "run")
    _jsonl(
        run / "children.jsonl",
        [
            {"time": 0.0, "child": "init-model", "event": "start", "pid": 1, "code": None},
            {"time": 40.0, "child": "init-model", "event": "exit", "pid": 1, "code": 0},
            {"time": 40.5, "child": "env-noop-0", "event": "start", "pid": 2, "code": None},
        ],
    )
    summary = summarize(RunRecords.load(run))
    assert summary["wall_time_s"] == 120.0 and summary["model_creation_s"] == 40.0
    assert summary["rollout_tokens_per_s"] == 3000 / 80
    write_report(run)
    assert "| of it creating the model | 0.7 min |" in (run / "summary.md").read_text()


def test_empty_run_writes_no_plots_and_a_summary_of_unknowns(tmp_path: Path) -> None:
    written = write_report(tmp_path)
    assert [p.name for p in written] == ["summary.md", "summary.json"]
    summary = summarize(RunRecords.load(tmp_path))
    assert summary["base_eval"] is None and summary["steps"] == 0
    assert "| held-out success, base (v?) | n/a |" in (tmp_path / "summary.md").read_text()


def test_overlay_of_two_runs(tmp_path: Path) -> None:
    a = make_run(tmp_path / "scaling_inter", gain=0.6)
    b = make_run(tmp_path / "fixed_cap", gain=0.3)
    out = tmp_path / "compare"
    written = write_overlay([a, b], out)
    assert sorted(p.name for p in written) == sorted([*PLOTS, "summaries.json"])
    summaries = json.loads((out / "summaries.json").read_text())
    assert summaries["scaling_inter"]["final_eval"]["success"] == 0.8
    assert round(summaries["fixed_cap"]["final_eval"]["success"], 6) == 0.5
    assert not (a / "plots").exists()  # the runs themselves are left alone


@pytest.mark.process
def test_plot_command(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a")

    def plot(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "agentgym_rl.cli", "plot", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    done = plot(str(a))
    assert done.returncode == 0, done.stderr
    assert str(a / "summary.md") in done.stdout.splitlines()
    refused = plot(str(a), str(tmp_path / "a"))
    assert refused.returncode == 2 and "needs --out DIR" in refused.stderr
    missing = plot(str(tmp_path / "missing"))
    assert missing.returncode == 2 and "not a folder" in missing.stderr


def test_training_curves_carry_a_smoothed_line() -> None:
    from agentgym_rl.report.plots import smoothed

    noisy = [0.0, 1.0] * 20
    line = smoothed(noisy)
    assert line[0] == 0.0  # debiased: the first point is itself, not pulled toward 0
    assert all(0.3 < y < 0.7 for y in line[10:])  # the alternation averaged out
    assert smoothed([0.5] * 5) == pytest.approx([0.5] * 5)


def test_yardsticks_draw_lines_per_category_and_place_the_policy_between_them(
    tmp_path: Path,
) -> None:
    """A run whose rollout server measured chance and rule: the summary says where the base and
    final policy stand between them, and the per-category plot is drawn."""
    run = make_run(tmp_path / "run")
    for i in (0, 1):
        path = run / f"rollout-{i}" / "eval.jsonl"
        records = [json.loads(x) for x in path.read_text().splitlines()[:-1]]
        for r, local in zip(records, (0.2, 0.8), strict=True):
            r["by_category"] = {"GoToLocal": local, "GoToObj": 0.9}
        _jsonl(path, records)
    sticks = {
        "env": "babyai",
        "chance": {"GoToLocal": 0.4, "GoToObj": 0.5, "all": 0.3},
        "rule": {"GoToLocal": 1.0, "GoToObj": 1.0, "all": 0.8},
        "rule_name": "the goal's action if listed, else turn left",
        "turn_cap": 5,
    }
    (run / "rollout-0" / "yardsticks.json").write_text(json.dumps({"key": sticks}))
    records = RunRecords.load(run)
    assert records.yardstick(None, "GoToLocal") == (0.4, 1.0)
    assert records.eval_by_category()["GoToLocal"] == [(0, 0.2), (4, 0.8)]
    figures = summarize(records)["yardsticks"]["babyai"]
    assert figures["base_share"] == pytest.approx(0.0)  # held-out 0.3 at v0: chance
    assert figures["final_share"] == pytest.approx(0.8)  # 0.7 of 0.3 -> 0.8
    written = write_report(run)
    assert (run / "plots" / "eval_by_category.png").read_bytes().startswith(PNG)
    md = (run / "summary.md").read_text()
    assert "babyai: chance (random valid actions), same tasks and cap | 0.300" in md
    assert "babyai: share of the chance-to-rule gap, base -> final | 0% -> 80%" in md
    assert run / "plots" / "eval_by_category.png" in written
