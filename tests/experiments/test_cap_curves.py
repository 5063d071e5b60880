"""Success against the test-time turn cap (`plot --group` over runs that `eval --turn-cap ...`
evaluated): what a sweep writes is read back per group as the mean and band over its runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_regimes import write_run

from agentgym_rl.episode.scoring import EvalRecord, summarize
from agentgym_rl.evaluation.turn_caps import CapSweep
from agentgym_rl.experiments.bands import write_bands
from agentgym_rl.experiments.cap_curves import CAPS_FILE, cap_table


def _episodes(successes: int, capped: int, total: int = 10) -> list[EvalRecord]:
    """`successes` solved episodes, `capped` failed on the cap, the rest failed otherwise."""
    out = []
    for i in range(total):
        status = "done" if i < successes or i >= successes + capped else "turn_cap"
        out.append(EvalRecord("babyai", "GoTo", f"babyai_{i}", i < successes, 0.0, status))
    return out


def _evaluated_run(root: Path, name: str, per_cap: dict[int, tuple[int, int]]) -> Path:
    run = write_run(root, name, "async", [(0, 0, 0.3), (1, 2, 0.5)], 10.0)
    reports = {cap: summarize(_episodes(*counts), {}) for cap, counts in per_cap.items()}
    CapSweep(reports).write(run / CAPS_FILE.parent)
    return run


def test_cap_table_is_the_mean_and_band_over_each_groups_runs(tmp_path: Path) -> None:
    si = [
        _evaluated_run(tmp_path, "si-0", {3: (4, 6), 10: (7, 1)}),
        _evaluated_run(tmp_path, "si-1", {3: (2, 8), 10: (9, 0)}),
    ]
    fixed = [_evaluated_run(tmp_path, "fixed-0", {3: (5, 5)})]
    unevaluated = write_run(tmp_path, "fixed-1", "async", [(0, 0, 0.3)], 5.0)
    table = cap_table({"si": si, "fixed": [*fixed, unevaluated]})
    assert [r["cap"] for r in table["si"]] == [3, 10]
    short, long = table["si"]
    assert (short["mean"], short["min"], short["max"]) == pytest.approx((0.3, 0.2, 0.4))
    assert short["capped"] == pytest.approx(0.7) and short["runs"] == 2
    assert (long["mean"], long["capped"]) == pytest.approx((0.8, 0.05))
    assert table["fixed"] == [
        {"cap": 3, "mean": 0.5, "min": 0.5, "max": 0.5, "capped": 0.5, "runs": 1, "each": [0.5]}
    ]

    written = write_bands({"si": si, "fixed": fixed}, tmp_path / "out")
    names = {p.name for p in written}
    assert {"turn_caps.png", "turn_caps.md", "turn_caps.json"} <= names
    assert json.loads((tmp_path / "out" / "turn_caps.json").read_text()) == table
    assert (
        "| si | 10 | 2 | 0.800 | 0.700 | 0.900 | 5% |"
        in (tmp_path / "out" / "turn_caps.md").read_text()
    )


def test_runs_without_test_time_caps_write_no_cap_curves(tmp_path: Path) -> None:
    runs = [write_run(tmp_path, "r-0", "async", [(0, 0, 0.3), (1, 2, 0.5)], 10.0)]
    written = write_bands({"plain": runs}, tmp_path / "out")
    assert not any(p.name.startswith("turn_caps") for p in written)
    assert not (tmp_path / "out" / "turn_caps.png").exists()
