"""What the launch tests share: a tiny run written as a train config with a `cluster:` section,
waiting on a launched run's records, and the processes it may have left."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from processes_seen import processes_mentioning
from tiny_run import tiny_train_config
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["processes_mentioning"]  # the launch tests import it from here, with the rest


def cluster_config(
    tmp_path: Path,
    model: Path,
    *,
    max_steps: int,
    name: str = "run",
    checkpoint_every: int = 1,
    het_job: bool = True,
) -> Path:
    """The split-cluster test's topology on one host: one BabyAI env server, one rollout
    server, one learner rank; restarts allowed."""
    data: dict[str, Any] = tiny_train_config(str(tmp_path / name), str(model), max_steps=max_steps)
    data["learn"]["checkpoint"] = {"every_steps": checkpoint_every, "export_hf": False}
    data["restart"] = {"max_restarts": 2}
    data["cluster"] = {"slurm": {"time": "30:00", "signal_grace_s": 60, "het_job": het_job}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def launch(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """`agentgym-rl launch ARGS` run from the repository root; its launch.json record."""
    done = subprocess.run(
        [sys.executable, "-m", "agentgym_rl.cli", "launch", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = Path(yaml.safe_load(Path(args[-1]).read_text())["run_dir"])
    record: dict[str, Any] = json.loads((run_dir / "launch.json").read_text())
    return {**record, "run_dir": run_dir, "stdout": done.stdout}


def learner_step(run_dir: Path) -> int:
    path = run_dir / "learn" / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return int(json.loads(lines[-1])["step"]) if lines else 0


def children(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "children.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def logs(run_dir: Path) -> str:
    """Every log of the run (the tail of each), for a failing assertion's message."""
    paths = sorted((run_dir / "logs").glob("*")) if (run_dir / "logs").is_dir() else []
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in paths)


def wait_for(
    what: str,
    ready: Callable[[], bool],
    run_dir: Path,
    timeout_s: float,
    explain: Callable[[], str] = lambda: "",
) -> None:
    """Poll `ready` until it holds; past `timeout_s`, fail with the run's logs and `explain()`
    (what else the caller knows of the stall: the scheduler's view of the job)."""
    wait_until(ready, timeout_s, what, poll_s=2.0, explain=lambda: f"{explain()}\n{logs(run_dir)}")
