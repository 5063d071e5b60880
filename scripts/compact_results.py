"""Fold the run folders of a study in docs/results into one compact record, and drop the raw files.

    python scripts/compact_results.py docs/results/STUDY [--apply]

A run folder is a folder holding `run.jsonl` or `configs/train.yaml`. Each becomes one entry of
`STUDY/runs.json` (keyed by its path under the study; one run a line): the config that
reproduces it (`configs/train.yaml` as text), its invocations (`run.jsonl`), `summary.json`, the
held-out evaluations (`rollout-*/eval.jsonl`), the rollout metrics at the last record of each
policy version (training success, reward, episodes, tokens, engine idle) and the learner's
figures per step, both as columns and rows (`time` in seconds from the first record). Floats
keep 4 significant digits. Then every file of the run folders goes but those a Markdown page
that stays links to (a write-up's figure, a run summary the README links, and what that summary
links). Without `--apply` it only prints what it would do.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORD = "runs.json"
ROLLOUT_KEYS = (
    "version",
    "uptime_s",
    "episodes",
    "successes",
    "success_rate",
    "reward_mean",
    "turns_mean",
    "generated_tokens",
    "engine_idle_ratio",
    "invalid_actions",
)
LEARN_KEYS = (
    "step",
    "time",
    "reward_mean",
    "loss",
    "kl_ref",
    "entropy",
    "clip_frac",
    "grad_norm",
    "lr",
    "tokens",
    "tokens_per_s",
    "step_s",
    "adv_by_turn",
    "step_group_share",
    "step_group_share_by_turn",
)
EVAL_DROP = ("time", "versions", "samples_per_task")


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a kill
    return out


def _table(records: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    """Records as columns (the keys any record has) and rows: no key repeated per row."""
    columns = [k for k in keys if any(k in r for r in records)]
    if "time" in columns and records:  # seconds since the first record
        t0 = records[0].get("time", 0.0)
        records = [{**r, "time": round(r["time"] - t0, 1)} if "time" in r else r for r in records]
    return {"columns": columns, "rows": [[r.get(k) for k in columns] for r in records]}


def _per_version(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The last rollout record of each version (training success per env under `by_env`)."""
    last: dict[int, dict[str, Any]] = {}
    for r in records:
        if isinstance(r.get("version"), int):
            last[r["version"]] = r
    rows = [r for _, r in sorted(last.items())]
    table = _table(rows, ROLLOUT_KEYS)
    if any("by_env" in r for r in rows):
        table["by_env"] = [r.get("by_env") for r in rows]
    return table


def _eval(record: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in record.items() if k not in EVAL_DROP}
    by_env = out.get("by_env")
    if isinstance(by_env, dict) and len(by_env) == 1:
        del out["by_env"]  # the overall figures are that env's
    return out


def entry(run: Path) -> dict[str, Any]:
    config = run / "configs" / "train.yaml"
    summary = run / "summary.json"
    servers = sorted(p for p in run.glob("rollout-*") if p.is_dir())
    return _round(
        {
            "config": config.read_text() if config.is_file() else None,
            "invocations": _jsonl(run / "run.jsonl"),
            "summary": json.loads(summary.read_text()) if summary.is_file() else None,
            "eval": {s.name: [_eval(r) for r in _jsonl(s / "eval.jsonl")] for s in servers},
            "rollout": {s.name: _per_version(_jsonl(s / "metrics.jsonl")) for s in servers},
            "learn": _table(_jsonl(run / "learn" / "metrics.jsonl"), LEARN_KEYS),
        }
    )


def _links(page: Path) -> set[Path]:
    targets = re.findall(r"\]\(([^)#\s]+)", page.read_text())
    return {(page.parent / t).resolve() for t in targets if "://" not in t}


def kept_files(inside: set[Path]) -> set[Path]:
    """The files of `inside` that a page outside it links to, and what those link to in turn."""
    pages = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    todo = [p for p in (ROOT / page for page in pages) if p.is_file() and p.resolve() not in inside]
    kept: set[Path] = set()
    while todo:
        for target in _links(todo.pop()) & inside - kept:
            kept.add(target)
            if target.suffix == ".md":
                todo.append(target)
    return kept


def run_folders(study: Path) -> list[Path]:
    marks = [*study.rglob("run.jsonl"), *study.rglob("configs/train.yaml")]
    runs = {m.parent if m.name == "run.jsonl" else m.parent.parent for m in marks}
    return sorted(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("study", type=Path)
    parser.add_argument("--apply", action="store_true", help="write runs.json and delete")
    args = parser.parse_args()
    study = args.study.resolve()
    runs = run_folders(study)
    if not runs:
        print(f"{study}: no run folders", file=sys.stderr)
        return 1
    record_path = study / RECORD
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    inside = {f.resolve() for run in runs for f in run.rglob("*") if f.is_file()}
    inside.discard(record_path)  # a study that is itself a run folder keeps its record
    drop = sorted(inside - kept_files(inside))
    for run in runs:
        record[run.relative_to(study).as_posix() or "."] = entry(run)
    # one run a line: the file reads as a list of runs, each greppable by name
    lines = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(record.items())]
    text = "{\n" + ",\n".join(lines) + "\n}\n"
    freed = sum(f.stat().st_size for f in drop)
    print(
        f"{study.name}: {len(runs)} runs -> {RECORD} ({len(text) / 1e3:.0f} kB); "
        f"drop {len(drop)} files ({freed / 1e6:.1f} MB)"
    )
    if args.apply:
        record_path.write_text(text)
        for f in drop:
            f.unlink()
        for d in sorted({p for r in runs for p in r.rglob("*") if p.is_dir()}, reverse=True):
            if not any(d.iterdir()):
                d.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
