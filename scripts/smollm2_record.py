"""One run's record of the SmolLM2 study (docs/results/smollm2-goto/seedN.json and the distractor
and TextCraft runs'), read from its run folder and what was evaluated into it: `eval --run RUN
--step N --out RUN/eval-vN` (goto_test), `--out RUN/eval-ladder-vN` (ladder_test), `--out
RUN/eval-SPLIT-vN` (any other split, e.g. distractor_test), a sampled evaluation's `--temperature
T --n N --out RUN/sampled-SPLIT-vN` and the goal probe's `--out RUN/probe-vN.json`
(distractor_test).

    python scripts/smollm2_record.py RUN OUT.json --command "agentgym-rl train ..." [--note TEXT]

The record keeps what the write-up quotes: the command, each invocation's outcome and wall time
(`run.jsonl`), the learner's figures per step (`learn/metrics.jsonl`), and each evaluated
checkpoint's success by category beside chance and the rule on the same tasks (`eval.json` and
its yardsticks). Floats keep 4 significant digits.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from agentgym_rl.config.rollout import RolloutConfig
from agentgym_rl.report.records import read_jsonl

STEP_KEYS = ("step_s", "tokens", "tokens_per_s", "reward_mean", "mismatch_kl", "sync_s", "loss")
"""The learner's figures of a step a record keeps."""


def _round(x: Any) -> Any:
    return float(f"{x:.4g}") if isinstance(x, float) else x


def steps(run: Path) -> list[dict[str, Any]]:
    """The learner's figures of each step (the last record of a step a resume repeated)."""
    by_step: dict[int, dict[str, Any]] = {}
    for r in read_jsonl(run / "learn" / "metrics.jsonl"):
        if isinstance(r.get("step"), int):
            by_step[r["step"]] = r
    return [
        {"step": s, **{k: _round(r[k]) for k in STEP_KEYS if k in r}}
        for s, r in sorted(by_step.items())
    ]


def evaluation(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Success by category (and `all`) beside chance and the rule, from one `eval --out`'s
    eval.json."""
    sticks: dict[str, Any] = next(iter(report.get("yardsticks", {}).values()), {})
    chance, rule = sticks.get("chance") or {}, sticks.get("rule") or {}
    out = {}
    for row in report["rows"]:
        cat = row["category"]
        out[cat] = {
            "tasks": row["tasks"],
            "success": _round(row["avg"]),
            "chance": _round(chance.get(cat)),
            "rule": _round(rule.get(cat)),
        }
    return out


LEGACY = {"": "goto_test", "ladder": "ladder_test"}
"""`eval-vN` and `eval-ladder-vN`, the GoTo seeds' folder names -> their split; any other
`eval-SPLIT-vN` folder names its split itself (`eval-distractor_test-v20`)."""

FOLDER = re.compile(r"(?P<kind>eval|sampled)-(?:(?P<split>\w+?)-)?v(?P<step>\d+)")


def _version(name: str) -> int:
    return int(re.sub(r"\D", "", name))


def evaluations(run: Path, cap: int) -> dict[str, dict[str, Any]]:
    """`{SPLIT_greedy_capC: {vN: success by category}}` of the run's evaluation folders, in step
    order; a sampled one's `SPLIT_sampled_capC` also names its temperature and samples a task."""
    out: dict[str, dict[str, Any]] = {}
    found = [(m, f) for f in run.iterdir() if (m := FOLDER.fullmatch(f.name))]
    for m, folder in sorted(found, key=lambda mf: int(mf[0]["step"])):
        if not (folder / "eval.json").is_file():
            continue
        split = LEGACY.get(m["split"] or "", m["split"])
        report = json.loads((folder / "eval.json").read_text())
        if m["kind"] == "eval":
            out.setdefault(f"{split}_greedy_cap{cap}", {})[f"v{m['step']}"] = evaluation(report)
            continue
        key = f"{split}_sampled_cap{cap}"
        out.setdefault(key, {"temperature": report["meta"]["options"]["engine"]["temperature"]})
        out[key]["samples_per_task"] = report["n"]
        out[key][f"v{m['step']}"] = evaluation(report)
    return out


def record(run: Path, command: str, note: str) -> dict[str, Any]:
    invocations = read_jsonl(run / "run.jsonl")
    # the typed config the run served, as `eval --run` reads it: its engine and its last cap
    rollout = RolloutConfig.from_yaml(run / "configs" / "rollout-0.yaml")
    engine = rollout.engine
    cap = max(rollout.turn_caps(env).turn_caps[-1] for env in rollout.dataset.envs)
    rec: dict[str, Any] = {
        "run": command,
        "note": note,
        "machine": "2 CPU cores, 24 GB",
        "invocations": [
            {k: _round(i.get(k)) for k in ("outcome", "exit_code", "resume", "start", "end")}
            for i in invocations
        ],
        "wall_s": _round(sum(float(i["end"]) - float(i["start"]) for i in invocations)),
        "steps": steps(run),
        "evaluation": f"eval --run RUN --step N --split SPLIT --temperature 0 (the run's "
        f"settings: {engine.dtype}, cap {cap}, {engine.max_tokens_per_turn} tokens "
        "a turn, its observation); chance and rule on the same tasks",
    }
    rec.update(evaluations(run, cap))
    probes = {
        f"v{_version(f.name)}": json.loads(f.read_text())
        for f in sorted(run.glob("probe-v*.json"), key=lambda p: _version(p.name))
    }
    if probes:  # `python -m agentgym_rl.evaluation.goal_probe --out RUN/probe-vN.json`
        rec["goal_probe_distractor_test"] = probes
    return rec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--command", required=True, help="the command that made the run")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    args.out.write_text(json.dumps(record(args.run, args.command, args.note), indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
