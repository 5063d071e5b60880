"""`agentgym-rl compare`: the asynchronous design against the reference's synchronous regime.

Runs `train` on one config in both modes (`mode: async` and `mode: sync`, the same model, data,
steps and settings), `--runs` times each, interleaved (async-1, sync-1, async-2, ...), with the
env servers' injected step latency (log-normal: `--latency-ms` median, `--latency-sigma` shape),
then writes held-out success against wall-clock minutes for every run on one figure and the
table of figures (`report/regimes.py`) to `--report`, with each run's records (configs, metrics,
evaluations, logs) copied beside them so the report can be rebuilt from that folder alone.
Runs that finished are kept: running the command again runs only what is missing (a run cut
short is set aside as `<name>.incomplete` and run again), so a long comparison can be spread
over several sittings. Exit codes: 0 done, 1 a run failed or was stopped, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

RECORDS = (
    "configs/train.yaml",
    "run.jsonl",
    "summary.md",
    "learn/metrics.jsonl",
    "rollout-0/metrics.jsonl",
    "rollout-0/eval.jsonl",
    "logs/learn.log",
    "logs/rollout-0.log",
)

NAME = "compare"
HELP = (
    "the async design against the reference's synchronous regime: train both on one config "
    "at an injected env latency, plot held-out success against wall-clock minutes"
)
DESCRIPTION = (
    "Runs `train` on --config in both modes (async, sync), --runs times each, with the env "
    "servers' injected step latency, then writes REPORT/compare.png (held-out success "
    "against wall-clock minutes), compare.md / compare.json (minutes to reach the sync "
    "runs' final success, seconds per step, engine and learner idle shares, ratios) and "
    "each run's records. Finished runs are kept: rerun to continue a comparison."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        default="configs/train/babyai_goto.yaml",
        metavar="FILE",
        help="the train config both regimes run (default: the README's BabyAI run)",
    )
    parser.add_argument(
        "--out", default="runs/compare", metavar="DIR", help="where the runs live (runs/compare)"
    )
    parser.add_argument(
        "--report",
        metavar="DIR",
        help="where the figure, the table and the runs' records go (default: OUT/report)",
    )
    parser.add_argument("--runs", type=int, default=2, help="runs per regime (default 2)")
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=500.0,
        help="median injected env step latency in ms (default 500)",
    )
    parser.add_argument(
        "--latency-sigma",
        type=float,
        default=1.0,
        help="log-normal shape of the latency; larger = longer tail (default 1.0)",
    )
    parser.add_argument(
        "--eval-every",
        type=int,
        default=10,
        help="held-out evaluation every N versions in both regimes (default 10)",
    )
    parser.add_argument(
        "--only", choices=("async", "sync"), help="run only this regime (the report has both)"
    )
    parser.add_argument(
        "--report-only", action="store_true", help="run nothing: rebuild the report"
    )


def run_config(base: dict[str, Any], args: argparse.Namespace, mode: str, run_dir: Path) -> dict:
    """The train config of one run: `base` with the mode, run folder, latency and eval cadence."""
    import copy

    config = copy.deepcopy(base)
    config["mode"], config["run_dir"] = mode, str(run_dir)
    latency = ["--step-latency-ms", str(args.latency_ms)]
    latency += ["--step-latency-sigma", str(args.latency_sigma)]
    for spec in config["env_servers"]:
        spec["args"] = [*spec.get("args", []), *latency]
    evaluation = config.setdefault("rollout", {}).get("eval")
    if isinstance(evaluation, dict):
        evaluation["every_versions"] = args.eval_every
    return config


def _finished(run_dir: Path) -> bool:
    try:
        return json.loads((run_dir / "summary.json").read_text()).get("outcome") == "finished"
    except (OSError, ValueError):
        return False


def _train(config: dict[str, Any], path: Path) -> int:
    import yaml  # type: ignore[import-untyped]

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    argv = [sys.executable, "-m", "agentgym_rl.cli", "train", "--config", str(path)]
    return subprocess.run(argv, check=False).returncode


# Logs name this machine's folders (installed packages, temp files, the checkout); the copies
# are meant to be committed, so those prefixes are replaced by what they stand for.
_MACHINE_PATHS = (
    (re.compile(r"/[^\s:'\"]*/site-packages/"), "<site-packages>/"),
    (re.compile(r"/tmp/"), "<tmp>/"),
)


def scrub_paths(text: str, checkout: Path) -> str:
    text = text.replace(f"{checkout.resolve()}/", "")
    for pattern, stand_in in _MACHINE_PATHS:
        text = pattern.sub(stand_in, text)
    return text


def copy_records(run_dir: Path, dest: Path) -> None:
    for rel in RECORDS:
        src = run_dir / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            if src.suffix == ".log":
                text = src.read_text(errors="replace")
                (dest / rel).write_text(scrub_paths(text, Path.cwd()))
            else:
                shutil.copyfile(src, dest / rel)


def write_comparison(names: list[str], out: Path, report: Path, latency: str) -> Path:
    """Load each named run (from OUT, else from the report's records), write the report."""
    from agentgym_rl.report.regimes import RegimeRun, compare, plot_regimes, regimes_markdown

    runs = []
    for name in names:
        source = out / name if _finished(out / name) else report / "runs" / name
        if (source / "configs" / "train.yaml").is_file():
            if source != report / "runs" / name:
                copy_records(source, report / "runs" / name)
            runs.append(RegimeRun.load(source))
    figures = compare(runs)
    figures["latency"] = latency
    report.mkdir(parents=True, exist_ok=True)
    (report / "compare.json").write_text(json.dumps(figures, indent=2) + "\n")
    (report / "compare.md").write_text(regimes_markdown(figures, latency))
    plot_regimes(runs, figures["target"], report / "compare.png")
    return report / "compare.md"


def run(args: argparse.Namespace) -> int:
    import yaml  # type: ignore[import-untyped]

    if args.runs < 1 or args.latency_ms < 0 or args.latency_sigma < 0 or args.eval_every < 1:
        print("compare: --runs and --eval-every must be >= 1, latencies >= 0", file=sys.stderr)
        return 2
    out = Path(args.out)
    report = Path(args.report) if args.report else out / "report"
    latency = f"log-normal, median {args.latency_ms:g} ms, sigma {args.latency_sigma:g}"
    names = [f"{m}-{k}" for k in range(1, args.runs + 1) for m in ("async", "sync")]
    if not args.report_only:
        try:
            base = yaml.safe_load(Path(args.config).read_text())
        except OSError as e:
            print(f"compare: cannot read --config: {e}", file=sys.stderr)
            return 2
        for name in names:
            mode, run_dir = name.split("-")[0], out / name
            if (args.only and mode != args.only) or _finished(run_dir):
                continue
            if run_dir.exists():  # cut short: its wall clock means nothing, run it again
                aside = run_dir.with_name(name + ".incomplete")
                shutil.rmtree(aside, ignore_errors=True)
                run_dir.rename(aside)
                print(f"compare: {run_dir} did not finish; moved to {aside}", flush=True)
            print(f"compare: {name} ({latency})", flush=True)
            code = _train(run_config(base, args, mode, run_dir), out / "configs" / f"{name}.yaml")
            write_comparison(names, out, report, latency)
            if code != 0:
                print(f"compare: {name} exited {code}; rerun to continue", file=sys.stderr)
                return 1
    table = write_comparison(names, out, report, latency)
    print(table.read_text())
    print(f"compare: figure {report / 'compare.png'}, table {table}")
    return 0
