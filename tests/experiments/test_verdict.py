"""The ScalingInter decision rule against hand-computed figures on written run records."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from agentgym_rl.experiments.verdict import (
    area,
    compare,
    comparison_markdown,
    decide,
    diagnostics,
    paired,
    sampled,
    verdict_markdown,
)

RUNG = "t3-d3+"


def _run(root: Path, name: str, curve: list[tuple[int, float]], **extra: object) -> Path:
    run = root / name
    (run / "rollout-0").mkdir(parents=True)
    (run / "learn").mkdir()
    evals = [
        {"version": v, "success": s, "by_category": {RUNG: s, "t1-d3+": 1.0}} for v, s in curve
    ]
    (run / "rollout-0" / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    rollout = extra.get("rollout", [])
    learn = extra.get("learn", [])
    (run / "rollout-0" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rollout))
    (run / "learn" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in learn))
    return run


def test_area_is_the_curves_mean_height() -> None:
    # trapezoids: (0.2 + 0.4) / 2 * 10 + (0.4 + 0.4) / 2 * 30 = 3 + 12 = 15, over 40 versions
    assert area([(0, 0.2), (10, 0.4), (40, 0.4)]) == pytest.approx(0.375)
    assert area([(5, 0.7)]) == 0.7
    with pytest.raises(ValueError):
        area([])


def test_paired_difference_mean_and_standard_error() -> None:
    # diffs 0.1, 0.3, 0.2 (seed 3 unpaired): mean 0.2, sd 0.1, se 0.1 / sqrt(3)
    p = paired({0: 0.5, 1: 0.6, 2: 0.4, 3: 0.9}, {0: 0.4, 1: 0.3, 2: 0.2})
    assert p.seeds == 3 and p.mean == pytest.approx(0.2)
    assert p.se == pytest.approx(0.1 / math.sqrt(3))
    assert p.beats and not p.loses  # 0.2 > 2 x 0.0577
    one = paired({0: 0.9}, {0: 0.1})
    assert one.seeds == 1 and math.isnan(one.se) and not one.beats  # one seed decides nothing


def _study(tmp_path: Path, si: list[list[tuple[int, float]]]) -> dict[str, dict[int, Path]]:
    short = [[(0, 0.2), (20, 0.3), (40, 0.30)], [(0, 0.2), (20, 0.3), (40, 0.32)]]
    long = [[(0, 0.2), (20, 0.4), (40, 0.5)], [(0, 0.2), (20, 0.4), (40, 0.6)]]
    arms = {"fixed_short": short, "fixed_long": long, "scaling_inter": si}
    return {
        arm: {s: _run(tmp_path, f"{arm}-s{s}", c) for s, c in enumerate(curves)}
        for arm, curves in arms.items()
    }


def test_the_candidate_wins_only_when_it_beats_both_arms_on_their_measures(tmp_path: Path) -> None:
    # final vs short: 0.6 - 0.30, 0.65 - 0.32 -> +0.300, +0.330; area vs long: long's areas are
    # (0.3 + 0.45) / 2 = 0.375 and 0.4; the candidate's (0.2, 0.5, 0.6) -> 0.45 and
    # (0.2, 0.55, 0.65) -> 0.4875: +0.075, +0.0875
    runs = _study(tmp_path, [[(0, 0.2), (20, 0.5), (40, 0.6)], [(0, 0.2), (20, 0.55), (40, 0.65)]])
    v = decide(runs, RUNG, candidate="scaling_inter", short="fixed_short", long="fixed_long")
    assert v.final["scaling_inter"] == {0: 0.6, 1: 0.65}
    assert v.final_vs_short.mean == pytest.approx(0.315)
    assert v.final_vs_short.se == pytest.approx(0.015)  # sd of (0.3, 0.33) / sqrt 2
    assert v.areas["fixed_long"] == pytest.approx({0: 0.375, 1: 0.4})
    assert v.area_vs_long.mean == pytest.approx(0.08125)
    assert v.area_vs_long.se == pytest.approx(0.00625)
    assert v.outcome == "wins"
    text = verdict_markdown(v, {"scaling_inter": "ScalingInter 2-3-5"})
    assert "**wins**" in text and "| ScalingInter 2-3-5 | 0.625 | 0.600 / 0.650 | 0.469 |" in text


def test_ahead_of_the_short_cap_but_not_the_long_ones_area_is_not_reproduced(
    tmp_path: Path,
) -> None:
    # the same finals, but a late rise: areas 0.3 and 0.325 against long's 0.375 and 0.4:
    # behind by 0.075 both times (SE 0): the long cap beats it -> reversed
    runs = _study(tmp_path, [[(0, 0.2), (20, 0.2), (40, 0.6)], [(0, 0.2), (20, 0.2), (40, 0.7)]])
    v = decide(runs, RUNG, candidate="scaling_inter", short="fixed_short", long="fixed_long")
    assert v.final_vs_short.beats and v.area_vs_long.loses and v.outcome == "reversed"
    # and with noisy differences that straddle zero: neither beats, nobody loses
    runs = _study(
        tmp_path / "b", [[(0, 0.2), (20, 0.7), (40, 0.31)], [(0, 0.2), (20, 0.1), (40, 0.3)]]
    )
    v = decide(runs, RUNG, candidate="scaling_inter", short="fixed_short", long="fixed_long")
    assert not v.final_vs_short.beats and not v.area_vs_long.beats
    assert v.outcome == "not reproduced"


def test_diagnostics_and_sampled_success(tmp_path: Path) -> None:
    by_turn = {
        "1": {"turns": 10, "invalid": 0, "repeated": 0, "kinds": {}},
        "2": {"turns": 6, "invalid": 0, "repeated": 4, "kinds": {}},
    }
    rollout = [
        {"statuses": {"done": 1}},
        {"statuses": {"done": 6, "turn_cap": 2}, "by_turn": by_turn, "repeated_actions": 4},
    ]
    learn = [{"step": 1, "entropy": 1.0, "kl_ref": 0.0}, {"step": 2, "entropy": 0.5, "kl_ref": 0.2}]
    run = _run(tmp_path, "r", [(0, 0.1)], rollout=rollout, learn=learn)
    d = diagnostics(run)
    assert d["capped"] == pytest.approx(0.25) and d["repeated"] == pytest.approx(0.25)
    assert d["entropy"] == pytest.approx(0.75) and d["kl_ref"] == pytest.approx(0.1)
    bare = diagnostics(_run(tmp_path, "bare", [(0, 0.1)]))
    assert bare == {"capped": None, "repeated": None, "entropy": None, "kl_ref": None}
    out = tmp_path / "sampled"
    out.mkdir()
    rows = [
        {"env": "babyai", "category": RUNG, "avg": 0.4},
        {"env": "babyai", "category": "x", "avg": 1},
    ]
    (out / "eval.json").write_text(json.dumps({"rows": rows}))
    assert sampled(out) == {RUNG: 0.4, "x": 1.0}
    assert sampled(tmp_path / "none") == {}


def test_a_method_helps_on_a_decisive_cell_and_hurts_on_any(tmp_path: Path) -> None:
    def run(name: str, t1: float, t3: list[float]) -> Path:
        out = tmp_path / name
        (out / "rollout-0").mkdir(parents=True)
        evals = [
            {"version": v, "by_category": {"t1-d3+": t1, RUNG: s}}
            for v, s in zip((0, 20), t3, strict=True)
        ]
        (out / "rollout-0" / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
        return out

    # t3 finals: base 0.30 / 0.32 / 0.31, method 0.50 / 0.55 / 0.52 (paired +0.213, SE 0.009)
    base = {s: run(f"grpo-s{s}", 0.9, [0.2, x]) for s, x in enumerate((0.30, 0.32, 0.31))}
    method = {s: run(f"gigpo-s{s}", 0.9, [0.2, x]) for s, x in enumerate((0.50, 0.55, 0.52))}
    runs = {"grpo": base, "gigpo": method}
    c = compare(runs, ["t1-d3+", RUNG, "all"], [RUNG], better="gigpo", than="grpo")
    assert c.outcome == "helps" and c.by_cell[RUNG].mean == pytest.approx(1.57 / 3 - 0.31)
    assert c.by_cell["t1-d3+"].mean == 0.0 and not c.by_cell["t1-d3+"].beats
    # `all`: the mean over the categories at the last version
    assert c.final["all"]["gigpo"][0] == pytest.approx((0.9 + 0.50) / 2)
    assert "**helps**" in comparison_markdown(c, {"gigpo": "+ GiGPO"})
    # ahead on the decisive cell but behind on another: it hurts
    worse = {
        s: run(f"worse-s{s}", t1, [0.2, x])
        for s, (t1, x) in enumerate(((0.7, 0.50), (0.72, 0.55), (0.69, 0.52)))
    }
    runs["worse"] = worse
    assert compare(runs, ["t1-d3+", RUNG], [RUNG], better="worse", than="grpo").outcome == "hurts"
    # within two standard errors: not told apart
    near = {s: run(f"near-s{s}", 0.9, [0.2, x]) for s, x in enumerate((0.35, 0.29, 0.31))}
    runs["near"] = near
    assert compare(runs, [RUNG], [RUNG], better="near", than="grpo").outcome == "not told apart"
