"""The benches' headline figures: one line each, read back by the runner, set in one table with
their ratios to baseline and ceiling read the same way (above 1 is better, 1 is the ceiling)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))

from figures import Figure, figure, parse, table
from records import RUN_ENV

BENCHES = Path(__file__).resolve().parents[2] / "benches"


def test_a_figure_printed_is_read_back_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUN_ENV, "1")  # as under run.py: no record of this test's figure
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        figure("rollout", "episodes", 6.0, "episodes/s", baseline=2.0, baseline_name="sync")
    line = out.getvalue().rstrip("\n")
    assert parse(line) == Figure("rollout", "episodes", 6.0, "episodes/s", 2.0, "sync")
    assert parse("async/sync: 3.00x") is None and parse("figure: {not json") is None


def test_ratios_read_the_same_way_for_rates_and_times() -> None:
    rate = Figure("t", "stream", 300.0, "MB/s", ceiling=1000.0, ceiling_name="raw")
    assert rate.ratio(rate.ceiling) == 0.3  # 0.3 of the ceiling
    time = Figure("g", "call", 4.0, "ms", ceiling=0.4, ceiling_name="direct", lower_is_better=True)
    assert time.ratio(time.ceiling) == 0.1  # ten times the ceiling's time: 0.1 of it
    idle = Figure("r", "idle", 10.0, "%", baseline=40.0, lower_is_better=True)
    assert idle.ratio(idle.baseline) == 4.0  # a quarter of the baseline's idle: 4x better
    assert Figure("x", "y", 0.0, "").ratio(1.0) is None


def test_the_table_has_a_row_per_figure_with_its_references() -> None:
    rows = table(
        [
            Figure("rollout", "episodes at 500 ms", 7.5, "episodes/s", 1.0, "sync", target=">= 8x"),
            Figure("transport", "stream", 310.0, "MB/s", ceiling=1000.0, ceiling_name="pyzmq"),
        ]
    ).splitlines()
    assert rows[0].startswith("| bench | figure | value | baseline | vs baseline | ceiling |")
    assert (
        rows[2]
        == "| rollout | episodes at 500 ms | 7.5 episodes/s | 1 (sync) | 7.50x |  |  | >= 8x |"
    )
    assert rows[3] == "| transport | stream | 310 MB/s |  |  | 1,000 (pyzmq) | 0.31x |  |"


@pytest.mark.process
def test_a_bench_run_alone_writes_a_record_of_its_figures(tmp_path: Path) -> None:
    """Under `benches/run.py` the run writes the record; alone, the bench does, at its exit."""
    script = tmp_path / "bench_x.py"
    script.write_text(
        "from figures import figure\n"
        "figure('x', 'speed', 3.0, 'steps/s', baseline=1.5, baseline_name='old', target='>= 2x')\n"
        "figure('x', 'idle', 0.5, '%', lower_is_better=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(BENCHES), "AGENTGYM_BENCH_RECORDS": str(tmp_path)}
    env.pop("AGENTGYM_BENCH_RUN", None)
    out = subprocess.run(
        [sys.executable, str(script), "--quick"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    [path] = tmp_path.glob("*-quick.json")
    assert f"record: {path}" in out.stdout
    record = json.loads(path.read_text())
    assert record["settings"]["benches"] == ["x"] and record["settings"]["quick"] is True
    assert [(f["name"], f["value"], f["baseline"]) for f in record["figures"]] == [
        ("speed", 3.0, 1.5),
        ("idle", 0.5, None),
    ]
    assert record["figures"][1]["lower_is_better"] is True
    under_run = subprocess.run(
        [sys.executable, str(script)],
        env={**env, "AGENTGYM_BENCH_RUN": "1"},
        capture_output=True,
        text=True,
    )
    assert under_run.returncode == 0 and "record:" not in under_run.stdout
    assert len(list(tmp_path.glob("*.json"))) == 1
