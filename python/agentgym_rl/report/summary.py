"""The run's summary: `summary.json` (figures) and `summary.md` (the same as a short table).

Contract: `summarize(run)` returns the figures of one run: learner steps, wall time (summed over
`train` invocations) and the part of it spent creating the model, base held-out success (the
lowest evaluated version, normally 0) and final held-out success (the highest), their difference
in points, the last training success rate, episodes and generated tokens over all rollout
servers, rollout generated tokens/s (over wall time less model creation), the learner's mean
tokens/s and the group accounting of the ledgers (`report/groups.py`: where every group went,
processes killed, groups trained twice); in a mixed run also each env's base and final held-out
success (`eval_by_env`); and per env whose yardsticks were measured, chance, the rule and the
share of the gap between them the base and final policy close (`yardsticks`). A figure the run
has no data for is None.
`write_summary(run, plots)` writes both files into the run directory and returns their paths;
`summary.md` ends with the run by turn index and held-out category (`report/by_turn.py`) and,
where a rollout server drew through a curriculum, its tasks by band (`rollout/curriculum.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentgym_rl.report import by_turn
from agentgym_rl.report.groups import account
from agentgym_rl.report.records import RunRecords, number


def summarize(run: RunRecords) -> dict[str, Any]:
    evals = run.eval_by_version()
    base = evals[0] if evals else None
    final = evals[-1] if evals else None
    steps = max((int(r["step"]) for r in run.learn if number(r, "step") is not None), default=0)
    wall = run.wall_time_s()
    creating = run.model_creation_s()
    running = None if wall is None else wall - creating
    tokens = run.counter_total("generated_tokens")
    learner_rates = [v for r in run.learn if (v := number(r, "tokens_per_s")) is not None]
    real, trained, computed = (
        sum(number(r, key) or 0.0 for r in run.learn)
        for key in ("tokens", "loss_tokens", "computed_tokens")
    )
    last_success = [
        v
        for records in run.rollout.values()
        if records and (v := number(records[-1], "success_rate")) is not None
    ]
    outcome = run.runs[-1].get("outcome") if run.runs else None
    acc = account(run.run_dir)
    return {
        "run_dir": str(run.run_dir),
        "outcome": outcome,
        "steps": steps,
        "wall_time_s": wall,
        "model_creation_s": creating,
        "base_eval": None if base is None else {"version": base[0], "success": base[1]},
        "final_eval": None if final is None else {"version": final[0], "success": final[1]},
        "eval_gain_points": None if base is None or final is None else 100 * (final[1] - base[1]),
        "train_success_last": sum(last_success) / len(last_success) if last_success else None,
        "episodes": run.counter_total("episodes"),
        "generated_tokens": tokens,
        "rollout_tokens_per_s": tokens / running if running else None,
        "learner_tokens_per_s": (
            sum(learner_rates) / len(learner_rates) if learner_rates else None
        ),
        # what the learner's passes spent on real and on trained tokens (the rest: padding)
        "learner_token_shares": [real / computed, trained / computed] if computed else None,
        "groups": acc.as_dict() if acc.made else None,
        "eval_by_env": {env: _base_final(run.eval_by_version(env)) for env in run.eval_envs()},
        "yardsticks": _standing(run),
    }


def _standing(run: RunRecords) -> dict[str, Any]:
    """Per env with measured yardsticks: chance, rule and where the base and final held-out
    success stand between them (0: chance, 1: the rule; the share of the gap closed)."""
    out: dict[str, Any] = {}
    for env, sticks in run.yardsticks.items():
        evals = run.eval_by_version(env if run.eval_envs() else None)
        chance, rule = run.yardstick(env)
        ends = (evals[0][1], evals[-1][1]) if evals else None
        shares = [_share(x, chance, rule) for x in ends] if ends else [None, None]
        out[env] = {
            "chance": chance,
            "rule": rule,
            "rule_name": sticks.get("rule_name"),
            "turn_cap": sticks.get("turn_cap"),
            "base_share": shares[0],
            "final_share": shares[1],
        }
    return out


def _share(success: float, chance: float | None, rule: float | None) -> float | None:
    """Where `success` stands from chance (0) to the rule (1); None without a gap."""
    if chance is None or rule is None or rule <= chance:
        return None
    return (success - chance) / (rule - chance)


def _base_final(evals: list[tuple[int, float]]) -> dict[str, Any]:
    """An env's first and last held-out success and the gain in points."""
    (v0, s0), (v1, s1) = evals[0], evals[-1]
    return {"base": [v0, s0], "final": [v1, s1], "gain_points": 100 * (s1 - s0)}


def _shares(shares: list[float] | None) -> str:
    return "n/a" if shares is None else f"{shares[0]:.2f} / {shares[1]:.2f}"


def _fmt(value: Any, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def _markdown(
    s: dict[str, Any], plots: list[Path], run_dir: Path, by_turn: str = "", bands: str = ""
) -> str:
    base, final = s["base_eval"] or {}, s["final_eval"] or {}
    rows = [
        ("outcome", s["outcome"] or "n/a"),
        ("learner steps", str(s["steps"])),
        ("wall time", "n/a" if s["wall_time_s"] is None else f"{s['wall_time_s'] / 60:.1f} min"),
        (f"held-out success, base (v{base.get('version', '?')})", _fmt(base.get("success"))),
        (f"held-out success, final (v{final.get('version', '?')})", _fmt(final.get("success"))),
        ("gain (points)", _fmt(s["eval_gain_points"], "+.1f")),
        ("training success (last)", _fmt(s["train_success_last"])),
        ("episodes", _fmt(s["episodes"], ".0f")),
        ("rollout generated tokens/s", _fmt(s["rollout_tokens_per_s"], ".1f")),
        ("learner tokens/s", _fmt(s["learner_tokens_per_s"], ".1f")),
        ("learner real / trained tokens of computed", _shares(s.get("learner_token_shares"))),
        ("groups", "n/a" if s["groups"] is None else s["groups"]["line"]),
    ]
    rows[6:6] = [
        (
            f"held-out success of {env}, v{e['base'][0]} -> v{e['final'][0]}",
            f"{e['base'][1]:.3f} -> {e['final'][1]:.3f} ({e['gain_points']:+.1f})",
        )
        for env, e in (s.get("eval_by_env") or {}).items()
    ]
    for env, y in (s.get("yardsticks") or {}).items():
        at = 6 + len(s.get("eval_by_env") or {})
        rule = "none declared" if y["rule"] is None else f"{y['rule']:.3f} ({y['rule_name']})"
        rows[at:at] = [
            (f"{env}: chance (random valid actions), same tasks and cap", _fmt(y["chance"])),
            (f"{env}: scripted rule", rule),
        ]
        if y["final_share"] is not None:
            closed = f"{100 * y['base_share']:.0f}% -> {100 * y['final_share']:.0f}%"
            rows.insert(at + 2, (f"{env}: share of the chance-to-rule gap, base -> final", closed))
    if s["model_creation_s"]:
        rows.insert(3, ("of it creating the model", f"{s['model_creation_s'] / 60:.1f} min"))
    lines = [f"# Run summary: {run_dir.resolve().name}", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    if by_turn:
        lines += ["", "## By turn index and held-out category", "", by_turn.rstrip("\n")]
    if bands:
        lines += ["", "## Curriculum", "", bands.rstrip("\n")]
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{p.stem}]({p.relative_to(run_dir).as_posix()})" for p in plots]
    return "\n".join(lines) + "\n"


def write_summary(run: RunRecords, plots: list[Path]) -> list[Path]:
    figures = summarize(run)
    inside = [p for p in plots if p.resolve().is_relative_to(run.run_dir.resolve())]
    md, js = run.run_dir / "summary.md", run.run_dir / "summary.json"
    tables = by_turn.render(run)
    bands = "\n".join(
        f"{path.parent.name}: {_bands(json.loads(path.read_text()))}"
        for path in sorted(run.run_dir.glob("rollout-*/curriculum.json"))
    )
    plotted = [p.resolve() for p in inside]
    md.write_text(_markdown(figures, plotted, run.run_dir.resolve(), tables, bands))
    js.write_text(json.dumps(figures, indent=2) + "\n")
    return [md, js]


def _bands(saved: dict[str, Any]) -> str:
    """A rollout server's curriculum (its `curriculum.json`, `rollout/curriculum.py`) as the
    table of keys by band ("" without draws)."""
    config, rows = saved.get("config") or {}, saved.get("rows") or []
    if not saved.get("draws") or not rows:
        return ""
    lines = [
        f"Tasks by band (curriculum by {config.get('by', '?')}, last {config.get('window', '?')} "
        "episodes each):",
        "",
        "| band | keys | recent success | drawn | kept | kept share |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        success = "-" if r["success"] is None else f"{r['success']:.2f}"
        share = f"{r['kept'] / r['considered']:.2f}" if r["considered"] else "-"
        lines.append(
            f"| {r['band']} | {r['keys']} | {success} | {r['considered']} | {r['kept']} | {share} |"
        )
    return "\n".join(lines) + "\n"
