"""A bench run's record: every headline figure, and what it was measured on.

Contract: `new_record(benches, quick, argv)` notes the commit (and whether the tree had changes),
the machine (CPU cores, memory, load average at the start), the date and the settings; the
caller adds each bench's figures (`figures.Figure`, as dicts) and its exit code and seconds;
`write(record, folder)` writes `<date>-<time>-<commit>[-quick].json` there and returns its path.
A full run's record goes to docs/results/benches (a few KB: docs/performance.md's table is
rendered from one by `scripts/record_figures.py render`); a `--quick` run's to runs/benches
(smoke sizes, never published). A bench run alone writes a record of its own (`figures.figure` collects its figures;
`benches/run.py` sets `RUN_ENV` so its benches leave that to it).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "docs" / "results" / "benches"
SMOKE = ROOT / "runs" / "benches"
RUN_ENV = "AGENTGYM_BENCH_RUN"
"""Set by `benches/run.py` for its benches: the run writes one record of them all."""
DIR_ENV = "AGENTGYM_BENCH_RECORDS"
"""A folder for the records instead of the default (`run.py --record-dir` wins over it)."""


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, check=True)
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.stdout.strip()


def machine() -> dict[str, Any]:
    """Cores, memory and load average now (the start of the run)."""
    memory_gb = None
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory_gb = round(pages * size / 2**30, 1)
    except (OSError, ValueError):
        pass
    return {
        "cpu_cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gb": memory_gb,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def new_record(benches: list[str], quick: bool, argv: list[str]) -> dict[str, Any]:
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "commit": _git("rev-parse", "HEAD"),
        "tree_changed": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "machine": machine(),
        "settings": {"benches": benches, "quick": quick, "argv": argv},
        "benches": {},
        "figures": [],
    }


def default_folder(quick: bool) -> Path:
    """Where a record goes: `DIR_ENV` if set, else by the run's form (module docstring)."""
    given = os.environ.get(DIR_ENV)
    return Path(given) if given else SMOKE if quick else PUBLISHED


def write(record: dict[str, Any], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stamp = record["date"][:19].replace(":", "").replace("T", "-")
    quick = "-quick" if record["settings"]["quick"] else ""
    path = folder / f"{stamp}-{(record['commit'] or 'nocommit')[:7]}{quick}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def load(path: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(path.read_text())
    return record


def main_argv() -> list[str]:
    return [Path(sys.argv[0]).name, *sys.argv[1:]]
