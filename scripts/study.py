"""A study: every arm of a study folder's arms.yaml (each a set of `train` overrides on one
common config) on each of its seeds, each final policy evaluated where arms.yaml asks, then the
figures, tables and verdict (docs/results/scalinginter*, docs/results/lora).

    python scripts/study.py                          # the default study, everything
    python scripts/study.py --seeds 0                # one seed of each arm
    python scripts/study.py --report-only            # figures and tables from what ran
    python scripts/study.py --study configs/studies/scalinginter_ladder

The common config is the folder's study.yaml, or the file arms.yaml names as `config:` (the
LoRA study trains the README's main config as it is). Resumable: a finished run is kept, an
interrupted one is resumed (`train --resume`), an evaluated policy is not evaluated again; after
an interruption, run the same command. Runs go one at a time, seed by seed (a partial study has
whole seeds): their wall-clock figures are compared, so give them the machine. Runs live under
--runs; what is worth keeping (configs, metrics, held-out curves, summaries, success per
test-time cap; no checkpoints) is copied to --records (default runs/studies/<study>: run output,
not committed; a write-up in docs/results keeps the figures and `scripts/compact_results.py`'s
runs.json), where `agentgym-rl plot --group` draws:
  schedules/  the arms without a budget: held-out success against step and wall-clock minutes
              (mean and min-max band over seeds), success against test-time turn cap
  params/     an arm against the one whose wall-clock budget it is given
An arm with `budget_of: ARM` is stopped once its minutes of RL (from its first held-out
evaluation) reach the mean of ARM's runs, and its last checkpoint is evaluated.
arms.yaml's `test_turn_caps: [..]` evaluates each final policy at those caps (in
RUN/turn-caps); `sampled: {temperature: T, n: N}` evaluates it N times a task at T (in
RUN/sampled); `decision: {rung, candidate, short, long}` names the held-out category and the
arms of ScalingInter's decision rule (`agentgym_rl.experiments.verdict`), written with each
arm's training diagnostics to the records' verdict.md / verdict.json; `comparisons: {cells,
decisive, pairs}` compares each pair [better, than] by final success per cell
(`verdict.compare`), in the records' comparisons.md / comparisons.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
STUDY = Path("configs/studies/scalinginter")
"""The default study folder (study.yaml, arms.yaml). Paths are relative to the repository root
(the script runs there): records name no machine."""
KEPT = (
    "configs",
    "learn/metrics.jsonl",
    "rollout-0/metrics.jsonl",
    "rollout-0/eval.jsonl",
    "rollout-0/yardsticks.json",
    "timeline.jsonl",
    "run.jsonl",
    "summary.json",
    "summary.md",
    "budget.json",
    "turn-caps/caps.md",
    "turn-caps/caps.json",
    "sampled/eval.md",
    "sampled/eval.json",
)
"""What a run's record keeps (paths under the run folder)."""
BUDGET_FILE = "budget.json"
SEED_KEYS = ("rollout.engine.seed", "rollout.dataset.shuffle_seed", "learn.seed")
"""What a seed sets: sampling, task order, the learner."""


@dataclass
class Arm:
    name: str
    label: str
    overrides: list[str]
    seeds: list[int]
    budget_of: str | None = None


@dataclass
class Study:
    folder: Path
    arms: dict[str, Arm]
    seeds: list[int]
    test_turn_caps: list[int] = field(default_factory=list)
    sampled: dict[str, float] = field(default_factory=dict)
    decision: dict[str, str] = field(default_factory=dict)
    comparisons: dict[str, list[Any]] = field(default_factory=dict)
    """`cells`, `decisive` and `pairs` ([better, than]) of the methods' rule (`verdict.compare`)."""
    config: Path = Path()
    """The common config every arm's overrides apply to."""

    @classmethod
    def load(cls, folder: Path, path: Path | None = None) -> Study:
        path = path or folder / "arms.yaml"
        raw = yaml.safe_load(path.read_text())
        seeds = list(raw["seeds"])
        arms = {
            name: Arm(
                name,
                spec.get("label", name),
                [str(o) for o in spec.get("overrides") or []],
                list(spec.get("seeds", seeds)),
                spec.get("budget_of"),
            )
            for name, spec in raw["arms"].items()
        }
        for arm in arms.values():
            if arm.budget_of is not None and arm.budget_of not in arms:
                raise SystemExit(f"{path}: arm {arm.name}: budget_of {arm.budget_of!r} is no arm")
        decision = {k: str(v) for k, v in (raw.get("decision") or {}).items()}
        for key in ("candidate", "short", "long"):
            if decision and decision.get(key) not in arms:
                raise SystemExit(f"{path}: decision.{key} names no arm")
        comparisons = {k: list(v) for k, v in (raw.get("comparisons") or {}).items()}
        for pair in comparisons.get("pairs", []):
            if len(pair) != 2 or not set(pair) <= set(arms):
                raise SystemExit(f"{path}: comparisons.pairs: {pair} is not two arms")
        if not set(comparisons.get("decisive", [])) <= set(comparisons.get("cells", [])):
            raise SystemExit(f"{path}: comparisons.decisive names a cell not in cells")
        caps = list(raw.get("test_turn_caps") or [])
        config = Path(raw["config"]) if "config" in raw else folder / "study.yaml"
        sampled = dict(raw.get("sampled") or {})
        return cls(folder, arms, seeds, caps, sampled, decision, comparisons, config)


def say(message: str) -> None:
    print(f"[study {time.strftime('%H:%M:%S')}] {message}", flush=True)


def outcome(run_dir: Path) -> str | None:
    """The run's outcome as `train` recorded it (finished, stopped, failed...), None if none."""
    summary = run_dir / "summary.json"
    if not summary.is_file():
        return None
    return str(json.loads(summary.read_text()).get("outcome"))


def done(run_dir: Path, arm: Arm) -> bool:
    if arm.budget_of is not None:
        return (run_dir / BUDGET_FILE).is_file() or outcome(run_dir) == "finished"
    return outcome(run_dir) == "finished"


def rl_minutes(run_dir: Path) -> float:
    """Minutes from the run's first held-out evaluation to its learner's last step."""
    from agentgym_rl.experiments.regimes import RegimeRun

    return RegimeRun.load(run_dir).minutes


def first_eval_start(run_dir: Path) -> float | None:
    """When the run's first held-out evaluation started (epoch seconds), once it has ended."""
    path = run_dir / "rollout-0" / "eval.jsonl"
    if not path.is_file():
        return None
    for line in path.read_text().splitlines():
        if line.strip():
            e = json.loads(line)
            return float(e["time"]) - float(e.get("wall_s", 0.0))
    return None


def train(study: Study, arm: Arm, seed: int, run_dir: Path, budget_min: float | None) -> None:
    """Run (or resume) one arm x seed; with a budget, stop it once its RL minutes reach it."""
    if (run_dir / "configs" / "train.yaml").is_file():
        cmd = ["agentgym-rl", "train", "--resume", str(run_dir)]
    else:
        seeds = [f"{key}={seed}" for key in SEED_KEYS]
        cmd = [
            "agentgym-rl",
            "train",
            "--config",
            str(study.config),
            f"run_dir={run_dir}",
            *arm.overrides,
            *seeds,
        ]
    say(f"{arm.name} seed {seed}: {' '.join(cmd)}")
    log = run_dir.parent / f"{run_dir.name}.log"
    with log.open("a") as out:
        child = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        stopped_at = _watch_budget(child, run_dir, budget_min) if budget_min else None
        code = child.wait()
    if stopped_at is not None:
        record = {"budget_minutes": budget_min, "stopped_at_minutes": stopped_at}
        (run_dir / BUDGET_FILE).write_text(json.dumps(record) + "\n")
    say(f"{arm.name} seed {seed}: exit {code}, outcome {outcome(run_dir)} (log {log})")


def _watch_budget(child: subprocess.Popen[bytes], run_dir: Path, budget_min: float) -> float | None:
    """Poll until the child ends or its RL minutes reach `budget_min` (then SIGINT it: `train`
    stops in order and the learner checkpoints); the minutes it was stopped at, or None."""
    while child.poll() is None:
        start = first_eval_start(run_dir)
        if start is not None and (time.time() - start) / 60 >= budget_min:
            elapsed = (time.time() - start) / 60
            say(f"budget of {budget_min:.1f} min reached ({elapsed:.1f}): stopping")
            child.send_signal(signal.SIGINT)
            return elapsed
        time.sleep(2.0)
    return None


def evaluate_caps(run_dir: Path, caps: list[int]) -> None:
    """Success of the run's last checkpoint at each test-time cap (in run_dir/turn-caps)."""
    out = run_dir / "turn-caps"
    if not caps or (out / "caps.json").is_file():
        return
    flags = [f"--turn-cap={c}" for c in caps]
    cmd = ["agentgym-rl", "eval", "--run", str(run_dir), *flags, "--out", str(out), "--no-progress"]
    say(" ".join(cmd))
    with (run_dir.parent / f"{run_dir.name}.eval.log").open("a") as log:
        subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=True)


def evaluate_sampled(run_dir: Path, sampled: dict[str, float]) -> None:
    """Sampled success of the run's last checkpoint (in run_dir/sampled), once."""
    out = run_dir / "sampled"
    if not sampled or (out / "eval.json").is_file():
        return
    cmd = [
        "agentgym-rl",
        "eval",
        "--run",
        str(run_dir),
        f"--temperature={sampled['temperature']}",
        f"--n={int(sampled['n'])}",
        "--no-yardsticks",
        "--out",
        str(out),
        "--no-progress",
    ]
    say(" ".join(cmd))
    with (run_dir.parent / f"{run_dir.name}.eval.log").open("a") as log:
        subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=True)


def keep_records(run_dir: Path, dest: Path) -> None:
    for rel in KEPT:
        src = run_dir / rel
        if src.is_dir():
            shutil.copytree(src, dest / rel, dirs_exist_ok=True)
        elif src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for path in dest.rglob("*"):  # a run given absolute paths recorded them: keep them relative
        if path.is_file():
            text = path.read_text()
            if f"{ROOT}/" in text:
                path.write_text(text.replace(f"{ROOT}/", ""))


def plot(groups: dict[str, str], out: Path) -> None:
    specs = [f"--group={label}={pattern}" for label, pattern in groups.items()]
    subprocess.run(["agentgym-rl", "plot", *specs, "--out", str(out)], cwd=ROOT, check=True)


def report(study: Study, records: Path) -> None:
    """The figures and tables of every arm with at least one recorded run."""
    runs = records / "runs"

    def groups(names: list[str]) -> dict[str, str]:
        return {
            study.arms[n].label: str(runs / f"{n}-s*")
            for n in names
            if n in study.arms and any(runs.glob(f"{n}-s*"))
        }

    schedules = groups([n for n, a in study.arms.items() if a.budget_of is None])
    if schedules:
        plot(schedules, records / "schedules")
    budgeted = [a for a in study.arms.values() if a.budget_of is not None]
    for arm in budgeted:
        pair = groups([arm.budget_of or "", arm.name])
        if len(pair) == 2:
            plot(pair, records / "params")
    if study.decision:
        write_verdict(study, runs, records)
    if study.comparisons:
        write_comparisons(study, runs, records)


def runs_by_arm(study: Study, runs: Path) -> dict[str, dict[int, Path]]:
    """Each arm's run folders by seed (`ARM-sSEED` under `runs`)."""
    return {
        name: {int(d.name.rsplit("-s", 1)[1]): d for d in sorted(runs.glob(f"{name}-s*"))}
        for name in study.arms
    }


def write_comparisons(study: Study, runs: Path, records: Path) -> None:
    """Each pair of arms under the methods' rule, in records/comparisons.md and .json."""
    from agentgym_rl.experiments import verdict

    by_arm = runs_by_arm(study, runs)
    labels = {n: a.label for n, a in study.arms.items()}
    c = study.comparisons
    found = [
        verdict.compare(by_arm, c["cells"], c.get("decisive", []), better=a, than=b)
        for a, b in c.get("pairs", [])
    ]
    text = "\n".join(verdict.comparison_markdown(x, labels) for x in found)
    (records / "comparisons.md").write_text(text)
    record = [asdict(x) for x in found]
    (records / "comparisons.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    for x in found:
        say(f"{x.better} against {x.than}: {x.outcome} (records/comparisons.md)")


def write_verdict(study: Study, runs: Path, records: Path) -> None:
    """The decision rule's verdict, each arm's sampled success on the rung and its training
    diagnostics (means over seeds), in records/verdict.md and verdict.json."""
    from agentgym_rl.experiments import verdict

    by_arm = runs_by_arm(study, runs)
    d = study.decision
    v = verdict.decide(
        by_arm, d["rung"], candidate=d["candidate"], short=d["short"], long=d["long"]
    )
    labels = {n: a.label for n, a in study.arms.items()}
    lines = [verdict.verdict_markdown(v, labels), "", "Training diagnostics (mean over seeds):", ""]
    lines += ["| arm | runs | sampled on the rung | ended on the cap | repeated | entropy | KL |"]
    lines += ["|---|---:|---:|---:|---:|---:|---:|"]
    table = {}
    for name, seeds in by_arm.items():
        diag = [verdict.diagnostics(r) for r in seeds.values()]
        rung = [
            x[d["rung"]]
            for r in seeds.values()
            if d["rung"] in (x := verdict.sampled(r / "sampled"))
        ]
        row = {k: _mean([x[k] for x in diag]) for k in ("capped", "repeated", "entropy", "kl_ref")}
        row["sampled"] = _mean(rung)
        table[name] = row
        cells = " | ".join(
            _fmt(row[k]) for k in ("sampled", "capped", "repeated", "entropy", "kl_ref")
        )
        lines.append(f"| {labels[name]} | {len(seeds)} | {cells} |")
    (records / "verdict.md").write_text("\n".join(lines) + "\n")
    record = {"verdict": verdict.verdict_json(v), "diagnostics": table}
    (records / "verdict.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    say(f"verdict on {d['rung']}: {v.outcome} (records/verdict.md)")


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [x for x in values if x is not None]
    return mean(kept) if kept else None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", type=Path, default=STUDY, help="the folder of arms.yaml")
    parser.add_argument("--arms-file", type=Path, help="default: the study's arms.yaml")
    parser.add_argument("--runs", type=Path, help="default: runs/studies/<study name>")
    parser.add_argument("--records", type=Path, help="default: runs/studies/<study name>")
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        help="these seeds, of every chosen arm (default: arms.yaml's)",
    )
    parser.add_argument("--arms", nargs="+", help="only these arms (default: all)")
    parser.add_argument("--report-only", action="store_true", help="no runs: figures, tables")
    args = parser.parse_args()
    os.chdir(ROOT)
    study = Study.load(args.study, args.arms_file)
    args.runs = args.runs or Path("runs/studies") / args.study.name
    args.records = args.records or args.runs
    chosen = [study.arms[a] for a in args.arms or study.arms]
    if not args.report_only:
        # budgeted arms last: their budget is what the arm they follow used
        chosen.sort(key=lambda a: a.budget_of is not None)
        # seeds given run every chosen arm; else each arm runs its own (arms.yaml)
        for seed in args.seeds or sorted({s for a in chosen for s in a.seeds}):
            for arm in chosen:
                if args.seeds or seed in arm.seeds:
                    run_arm(study, arm, seed, args.runs, args.records)
    report(study, args.records)
    say(f"records in {args.records}")
    return 0


def run_arm(study: Study, arm: Arm, seed: int, runs: Path, records: Path) -> None:
    run_dir = runs / f"{arm.name}-s{seed}"
    if not done(run_dir, arm):
        budget = None
        if arm.budget_of is not None:
            ref = [r for r in runs.glob(f"{arm.budget_of}-s*") if outcome(r) == "finished"]
            if not ref:
                say(f"{arm.name}: no finished {arm.budget_of} run to take the budget of; skipped")
                return
            budget = mean(rl_minutes(r) for r in ref)
        runs.mkdir(parents=True, exist_ok=True)
        train(study, arm, seed, run_dir, budget)
        if not done(run_dir, arm):
            say(f"{arm.name} seed {seed} did not finish; run the study again to resume it")
            return
    evaluate_caps(run_dir, study.test_turn_caps)
    evaluate_sampled(run_dir, study.sampled)
    keep_records(run_dir, records / "runs" / run_dir.name)


if __name__ == "__main__":
    sys.exit(main())
