"""Seed bands (`plot --group`): runs grouped by label, a group's curve the mean over the runs
that evaluated each version, its band their min and max, its table the final success's mean and
spread, and the command's errors for a group that matches nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_regimes import write_run

from agentgym_rl.experiments.bands import Group, group_runs, write_bands
from agentgym_rl.experiments.regimes import RegimeRun
from agentgym_rl.report.records import RunRecords


def _seeds(root: Path, label: str, finals: list[float]) -> list[Path]:
    return [
        write_run(root, f"{label}-seed{i}", "async", [(0, 0, 0.4), (1, 2, 0.6), (2, 4, f)], 30.0)
        for i, f in enumerate(finals)
    ]


def test_a_groups_curve_is_the_mean_and_band_over_its_seeds(tmp_path: Path) -> None:
    dirs = _seeds(tmp_path, "si", [0.7, 0.9])
    group = Group("si", [RunRecords.load(d) for d in dirs], [RegimeRun.load(d) for d in dirs])
    versions = group.by_version()
    assert [v for v, *_ in versions] == [0, 2, 4]
    last = versions[-1]
    assert last[1:4] == pytest.approx((0.8, 0.7, 0.9))
    figures = group.figures()
    assert figures["final_success"] == [0.7, 0.9]
    assert figures["final_mean"] == pytest.approx(0.8)
    assert figures["final_sd"] == pytest.approx(0.1)
    assert figures["base_mean"] == pytest.approx(0.4)
    assert figures["collapse"] is None
    assert figures["rl_min"] == pytest.approx(2.0)  # first evaluation to the last step, 4 x 30 s


def test_a_fall_after_the_peak_is_marked_a_collapse(tmp_path: Path) -> None:
    dirs = [
        write_run(tmp_path, f"long-{i}", "async", [(0, 0, 0.4), (1, 2, 0.8), (2, 4, 0.5)], 30.0)
        for i in range(2)
    ]
    group = Group("long", [RunRecords.load(d) for d in dirs], [RegimeRun.load(d) for d in dirs])
    assert group.collapse() == pytest.approx(
        {"peak_version": 2, "peak": 0.8, "low_version": 4, "low": 0.5}
    )
    write_bands({"long": dirs}, tmp_path / "out")
    assert "0.800 at v2 -> 0.500 at v4" in (tmp_path / "out" / "bands.md").read_text()


def test_group_runs_reads_label_and_glob(tmp_path: Path) -> None:
    _seeds(tmp_path, "si", [0.7, 0.9])
    _seeds(tmp_path, "fixed", [0.5])
    groups = group_runs([f"ScalingInter={tmp_path}/si-*", f"fixed 8={tmp_path}/fixed-*"])
    assert [p.name for p in groups["ScalingInter"]] == ["si-seed0", "si-seed1"]
    assert [p.name for p in groups["fixed 8"]] == ["fixed-seed0"]
    with pytest.raises(ValueError, match="LABEL=GLOB"):
        group_runs(["no-label"])
    with pytest.raises(ValueError, match="matches no run"):
        group_runs([f"x={tmp_path}/nothing-*"])


@pytest.mark.process
def test_plot_group_writes_the_figure_and_table(tmp_path: Path) -> None:
    _seeds(tmp_path, "si", [0.7, 0.9])
    _seeds(tmp_path, "fixed", [0.5, 0.6, 0.55])
    out = tmp_path / "bands"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentgym_rl.cli",
            "plot",
            "--out",
            str(out),
            "--group",
            f"ScalingInter={tmp_path}/si-*",
            "--group",
            f"fixed={tmp_path}/fixed-*",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (out / "bands.png").stat().st_size > 10_000
    table = json.loads((out / "bands.json").read_text())
    assert table["fixed"]["final_mean"] == pytest.approx(0.55)
    assert "| ScalingInter | 2 |" in (out / "bands.md").read_text()
    bad = subprocess.run(
        [sys.executable, "-m", "agentgym_rl.cli", "plot", "--out", str(out), "--group", "x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "LABEL=GLOB" in bad.stderr


def test_the_figure_draws_chance_and_the_rule_of_the_held_out_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both panels get the yardsticks of the first run that measured them; none are drawn
    where no run did."""
    from agentgym_rl.experiments import bands

    drawn: list[tuple[float | None, float | None]] = []

    def spy(ax: object, run: RunRecords, env: str | None, **kw: object) -> None:
        drawn.append(run.yardstick(env))

    monkeypatch.setattr(bands, "yardstick_lines", spy)
    plain = _seeds(tmp_path, "plain", [0.6])
    write_bands({"plain": plain}, tmp_path / "none")
    assert drawn == []
    measured = _seeds(tmp_path, "measured", [0.7, 0.8])
    sticks = {"babyai|x": {"env": "babyai", "chance": {"all": 0.43}, "rule": {"all": 0.98}}}
    (measured[1] / "rollout-0").mkdir(exist_ok=True)
    (measured[1] / "rollout-0" / "yardsticks.json").write_text(json.dumps(sticks))
    write_bands({"plain": plain, "measured": measured}, tmp_path / "out")
    assert drawn == [(0.43, 0.98), (0.43, 0.98)]
