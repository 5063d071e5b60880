"""Async against sync: `train` on one config in both modes, interleaved, and their report.

Contract: `compare_regimes(options)` runs `train` on `options.config` in both modes (`mode:
async` and `mode: sync`, the same model, data, steps and settings), `options.runs` times each,
interleaved (async-1, sync-1, async-2, ...), with the env servers' injected step latency
(log-normal: `latency_ms` median, `latency_sigma` shape), then writes held-out success against
wall-clock minutes for every run on one figure and the table of figures (`experiments/regimes.py`) to
`options.report`, with each run's records (configs, metrics, evaluations, logs) copied beside
them so the report can be rebuilt from that folder alone (`report_only`). Runs that finished are
kept: calling it again runs only what is missing (a run cut short is set aside as
`<name>.incomplete` and run again). It returns the report's table; bad options or an unreadable
config raise ValueError, a run that failed `CompareError` naming it.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml  # type: ignore[import-untyped]

from agentgym_rl.experiments.regimes import RegimeRun, compare, plot_regimes, regimes_markdown
from agentgym_rl.processes.child import cli_argv

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
"""What of a run the report keeps."""


class CompareError(RuntimeError):
    """A run failed or was stopped (rerun to continue)."""


@dataclass(frozen=True)
class CompareOptions:
    """One comparison (`agentgym-rl compare`'s flags)."""

    config: Path = Path("configs/train/babyai_goto.yaml")
    out: Path = Path("runs/compare")
    report: Path | None = None
    """Default: `out/report`."""
    runs: int = 2
    latency_ms: float = 500.0
    latency_sigma: float = 1.0
    eval_every: int = 10
    only: Literal["async", "sync"] | None = None
    report_only: bool = False

    @property
    def report_dir(self) -> Path:
        return self.report or self.out / "report"

    @property
    def latency(self) -> str:
        return f"log-normal, median {self.latency_ms:g} ms, sigma {self.latency_sigma:g}"

    def names(self) -> list[str]:
        return [f"{m}-{k}" for k in range(1, self.runs + 1) for m in ("async", "sync")]


def compare_regimes(options: CompareOptions) -> Path:
    """Run what is missing, then write the report; see the module docstring."""
    if options.runs < 1 or options.latency_ms < 0 or options.latency_sigma < 0:
        raise ValueError("runs must be >= 1, latencies >= 0")
    if options.eval_every < 1:
        raise ValueError("eval_every must be >= 1")
    names, out = options.names(), options.out
    if not options.report_only:
        try:
            base = yaml.safe_load(options.config.read_text())
        except OSError as e:
            raise ValueError(f"cannot read the config: {e}") from None
        for name in names:
            mode, run_dir = name.split("-")[0], out / name
            if (options.only and mode != options.only) or _finished(run_dir):
                continue
            if run_dir.exists():  # cut short: its wall clock means nothing, run it again
                aside = run_dir.with_name(name + ".incomplete")
                shutil.rmtree(aside, ignore_errors=True)
                run_dir.rename(aside)
                print(f"compare: {run_dir} did not finish; moved to {aside}", flush=True)
            print(f"compare: {name} ({options.latency})", flush=True)
            config = run_config(base, options, mode, run_dir)
            code = _train(config, out / "configs" / f"{name}.yaml")
            write_comparison(names, out, options.report_dir, options.latency)
            if code != 0:
                raise CompareError(f"{name} exited {code}; rerun to continue")
    return write_comparison(names, out, options.report_dir, options.latency)


def run_config(
    base: dict[str, Any], options: CompareOptions, mode: str, run_dir: Path
) -> dict[str, Any]:
    """The train config of one run: `base` with the mode, run folder, latency and eval cadence."""
    config = copy.deepcopy(base)
    config["mode"], config["run_dir"] = mode, str(run_dir)
    latency = ["--step-latency-ms", str(options.latency_ms)]
    latency += ["--step-latency-sigma", str(options.latency_sigma)]
    for spec in config["env_servers"]:
        spec["args"] = [*spec.get("args", []), *latency]
    evaluation = config.setdefault("rollout", {}).get("eval")
    if isinstance(evaluation, dict):
        evaluation["every_versions"] = options.eval_every
    return config


def _finished(run_dir: Path) -> bool:
    try:
        return json.loads((run_dir / "summary.json").read_text()).get("outcome") == "finished"
    except (OSError, ValueError):
        return False


def _train(config: dict[str, Any], path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    argv = cli_argv("train", "--config", str(path))
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
