"""Runs the scripts in benches/ one after another, each in its own interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHES = {
    "builder": "bench_builder.py",
    "codec": "bench_codec.py",
    "transport": "bench_transport.py",
    "envpool": "bench_envpool.py",
    "rollout": "bench_rollout.py",
    "learner": "bench_learner.py",
    "sciworld": "bench_sciworld.py",
    "retrieval": "bench_retrieval.py",
    "web": "bench_web.py",
    "weights": "bench_weights.py",
}


def benches_dir() -> Path:
    # The benches ship with the source tree, not the wheel; the editable install finds them.
    return Path(__file__).resolve().parents[2] / "benches"


def run_benches(only: list[str] | None, quick: bool) -> int:
    root = benches_dir()
    if not root.is_dir():
        print(f"benches/ not found next to the package ({root}); run from a source checkout")
        return 2
    failed = []
    for name in only or list(BENCHES):
        script = root / BENCHES[name]
        print(f"\n=== {name}: {script.name} ===", flush=True)
        cmd = [sys.executable, str(script)] + (["--quick"] if quick else [])
        if subprocess.run(cmd, check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
        return 1
    return 0
