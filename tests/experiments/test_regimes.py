"""The async-vs-sync comparison's figures, from run folders written here with known timings:
the clock starts at the first held-out evaluation, the target is the sync runs' mean final
success, idle shares are time-weighted, and `compare --report-only` rebuilds the report from
its own copied records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agentgym_rl.experiments.regimes import RegimeRun, compare

pytestmark = pytest.mark.process

T0 = 1_800_000_000.0


def write_run(
    root: Path, name: str, mode: str, evals: list[tuple[float, int, float]], step_s: float
) -> Path:
    """A finished run: evaluations (start minute, version, success) taking 30 s each, four
    learner steps `step_s` apart, each busy for half of that, and the engine idle 20% of the
    time until minute 2, 60% after."""
    run = root / name
    (run / "configs").mkdir(parents=True)
    (run / "configs" / "train.yaml").write_text(yaml.safe_dump({"mode": mode}))
    (run / "rollout-0").mkdir()
    lines = [
        {"version": v, "success": s, "wall_s": 30.0, "time": T0 + 60 * m + 30.0}
        for m, v, s in evals
    ]
    (run / "rollout-0" / "eval.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    snaps = [
        {"time": T0 + 60 * m, "engine_idle_ratio": 0.2 if m <= 2 else 0.6} for m in (1, 2, 3, 4)
    ]
    (run / "rollout-0" / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in snaps))
    (run / "learn").mkdir()
    steps = [
        {"step": i, "time": T0 + i * step_s, "step_s": step_s / 2, "sync_s": 0.0}
        for i in (1, 2, 3, 4)
    ]
    (run / "learn" / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in steps))
    (run / "summary.json").write_text(json.dumps({"outcome": "finished"}))
    return run


def test_figures_on_the_comparisons_clock(tmp_path: Path) -> None:
    a = RegimeRun.load(
        write_run(tmp_path, "async-1", "async", [(0, 0, 0.4), (1, 2, 0.7), (2, 4, 0.8)], 30.0)
    )
    s = RegimeRun.load(
        write_run(tmp_path, "sync-1", "sync", [(0, 0, 0.4), (2, 2, 0.5), (4, 4, 0.6)], 60.0)
    )
    assert a.curve == [(0.0, 0, 0.4), (1.0, 2, 0.7), (2.0, 4, 0.8)]
    assert (a.steps, a.minutes, a.step_s) == (4, 2.0, 30.0)
    assert a.learner_idle == pytest.approx(0.5)
    assert a.engine_idle == pytest.approx(0.2)  # snapshots up to minute 2 only
    assert s.engine_idle == pytest.approx((0.2 * 2 + 0.6 * 2) / 4)
    figures = compare([a, s])
    assert figures["target"] == 0.6
    rows = {r["run"]: r for r in figures["runs"]}
    assert (
        rows["async-1"]["minutes_to_target"] == 1.0 and rows["sync-1"]["minutes_to_target"] == 4.0
    )
    assert figures["async_over_sync"]["minutes_to_target"] == pytest.approx(0.25)
    assert figures["async_over_sync"]["step_s"] == pytest.approx(0.5)
    assert a.minutes_to(0.9) is None
    late = RegimeRun.load(
        write_run(tmp_path, "sync-2", "sync", [(0, 0, 0.4), (2, 2, 0.5), (4, 4, 0.5)], 60.0)
    )
    figures = compare([a, s, late])
    assert figures["target"] == pytest.approx(0.55)
    assert (figures["modes"]["sync"]["reached"], figures["modes"]["async"]["reached"]) == (1, 1)


def test_a_resumed_runs_clock_leaves_out_the_time_it_was_down(tmp_path: Path) -> None:
    run = write_run(tmp_path, "resumed", "async", [(0, 0, 0.4), (11.5, 2, 0.7)], 180.0)
    assert RegimeRun.load(run).curve[-1][0] == 11.5
    # interrupted at minute 1.5, resumed at minute 10.5: nine minutes down
    invocations = [
        {"start": T0 - 5, "end": T0 + 90, "outcome": "SIGINT", "resume": False},
        {"start": T0 + 630, "end": T0 + 900, "outcome": "finished", "resume": True},
    ]
    (run / "run.jsonl").write_text("".join(json.dumps(x) + "\n" for x in invocations))
    resumed = RegimeRun.load(run)
    assert resumed.curve == [(0.0, 0, 0.4), (2.5, 2, 0.7)]
    assert resumed.minutes == pytest.approx(3.0)  # the last step at minute 12, 9 of them down


def test_report_only_rebuilds_from_its_own_records(tmp_path: Path) -> None:
    out, report = tmp_path / "runs", tmp_path / "report"
    write_run(out, "async-1", "async", [(0, 0, 0.4), (1, 4, 0.8)], 30.0)
    sync = write_run(out, "sync-1", "sync", [(0, 0, 0.4), (3, 4, 0.6)], 60.0)
    (sync / "logs").mkdir()
    (sync / "logs" / "learn.log").write_text(
        f"{Path.cwd()}/runs/x.yaml /opt/py/lib/python3.11/site-packages/vllm/a.py:3: /tmp/vllm_1\n"
    )
    argv = [sys.executable, "-m", "agentgym_rl.cli", "compare", "--report-only", "--runs", "1"]
    for source in (["--out", str(out)], ["--out", str(tmp_path / "gone")]):
        done = subprocess.run(
            [*argv, *source, "--report", str(report)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        figures = json.loads((report / "compare.json").read_text())
        assert [r["run"] for r in figures["runs"]] == ["async-1", "sync-1"]
        assert figures["async_over_sync"]["minutes_to_target"] == pytest.approx(1 / 3)
        assert (report / "compare.png").stat().st_size > 0
        markdown = (report / "compare.md").read_text()
        assert "| mean sync | sync |" in markdown and "sync 1 of 1" in markdown
    assert (report / "runs" / "sync-1" / "rollout-0" / "eval.jsonl").is_file()
    # Copied logs name no folder of this machine.
    copied = (report / "runs" / "sync-1" / "logs" / "learn.log").read_text()
    assert copied == "runs/x.yaml <site-packages>/vllm/a.py:3: <tmp>/vllm_1\n"
