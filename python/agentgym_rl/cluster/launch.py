"""From a train config to a job on a cluster's scheduler: what `agentgym-rl launch` does.

Contract: `prepare(train)` checks the run as it will be planned on a cluster (every problem of
`plan_run`, on stand-in hosts, so a bad config fails here and not in the queue) and writes the
run's effective config to `run_dir/configs/train.yaml`, which the job reads back.
`launch_slurm(train, dry_run)` also writes `run_dir/launch/job.sbatch` and, unless `dry_run`,
submits it; `launch_ray(train, address, dry_run)` submits `agentgym-rl job --ray RUN_DIR` as a
Ray job at `address` (the cluster's dashboard, `http://HEAD:8265`). Both record what they
submitted in `run_dir/launch.json` (`{"scheduler", "job_id", ...}`), which `status` reads.
Before anything is written, a submission checks its scheduler is there (`sbatch` on PATH; the
`ray` command, and a dashboard answering at `address`), refusing with one line that says what
to do (`SubmitError`).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from agentgym_rl.cluster.slurm_script import SubmitError, batch_script, submit
from agentgym_rl.config.cluster import ClusterConfig
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.processes.child import cli_argv
from agentgym_rl.processes.ownership import unowned_env
from agentgym_rl.processes.ports import JobPorts
from agentgym_rl.supervise.placement import Placement
from agentgym_rl.supervise.plan import PlanError, plan_run


@dataclass(frozen=True)
class Launched:
    """What was written and submitted."""

    run_dir: Path
    scheduler: str
    script: Path | None
    job_id: str | None
    """None for a dry run."""


def stand_in(train: TrainConfig) -> Placement:
    """The nodes `train`'s cluster section asks for, named by role (`env-0`, `rollout-0`,
    `learner-0`, ...): a placement to check the run on before any scheduler gives real ones."""
    cluster = train.cluster or ClusterConfig()
    return Placement.spread(
        [f"env-{i}" for i in range(cluster.env.nodes)],
        [f"rollout-{i}" for i in range(cluster.rollout.nodes)],
        [f"learner-{i}" for i in range(cluster.learner.nodes)],
        rollout_servers=train.rollout_servers,
        rollout_gpus_per_node=cluster.rollout.gpus_per_node,
    )


def prepare(train: TrainConfig) -> TrainConfig:
    """Check the run on stand-in hosts (raises `PlanError`) and write its effective config."""
    cluster = train.cluster or ClusterConfig()
    absolute = {"run_dir": train.run_dir.resolve(), "model": train.model.resolve()}
    train = train.model_copy(update={"cluster": cluster, **absolute})
    ports = JobPorts.for_job(0, cluster.port_base, cluster.ports_per_job)
    plan_run(train, placement=stand_in(train), ports=ports)
    configs = train.run_dir / "configs"
    configs.mkdir(parents=True, exist_ok=True)
    train.write_run_copy(configs / "train.yaml")
    return train


def _record(launched: Launched, **extra: object) -> Launched:
    record = {
        "scheduler": launched.scheduler,
        "job_id": launched.job_id,
        "script": str(launched.script) if launched.script else None,
        "time": time.time(),
        **extra,
    }
    with (launched.run_dir / "launch.json").open("w") as f:
        json.dump(record, f, indent=1)
    return launched


def _check_slurm() -> None:
    if shutil.which("sbatch") is None:
        raise SubmitError(
            "sbatch not found on PATH: launch --slurm runs where SLURM's commands are (a login "
            "node); --dry-run writes the batch script without them"
        )


def _check_ray(address: str) -> None:
    if shutil.which("ray") is None:
        raise SubmitError("the ray command is not found: pip install 'agentgym-rl[ray]'")
    try:
        with urllib.request.urlopen(f"{address.rstrip('/')}/api/version", timeout=5.0):
            pass
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise SubmitError(
            f"no Ray dashboard answers at {address} ({reason}): start the cluster "
            "(ray start --head) or give its dashboard's address, e.g. http://HEAD:8265"
        ) from None


def launch_slurm(train: TrainConfig, *, dry_run: bool = False) -> Launched:
    """Write the batch script of `train` and submit it (see the module contract)."""
    if not dry_run:
        _check_slurm()
    train = prepare(train)
    script = train.run_dir / "launch" / "job.sbatch"
    script.parent.mkdir(parents=True, exist_ok=True)
    (train.run_dir / "logs").mkdir(exist_ok=True)  # sbatch's --output folder must exist
    script.write_text(batch_script(train))
    script.chmod(0o755)
    job_id = None if dry_run else str(submit(script))
    return _record(Launched(train.run_dir, "slurm", script, job_id))


def launch_ray(train: TrainConfig, address: str, *, dry_run: bool = False) -> Launched:
    """Submit the run as a Ray job at `address` (see the module contract). The job's driver runs
    this Python (`sys.executable`) on the head node, with nothing uploaded: the run folder and
    this installation must be where every node sees them."""
    if not dry_run:
        _check_ray(address)
    train = prepare(train)
    submission = f"agentgym-rl-{train.run_dir.name}-{int(time.time())}"
    job = cli_argv("job", "--ray", str(train.run_dir))
    # the driver starts where `ray start` ran: go where the config's relative paths point
    entry = ["bash", "-c", f"cd {shlex.quote(str(Path.cwd()))} && exec {shlex.join(job)}"]
    # `ray job stop` kills the driver this long after its SIGTERM (Ray's default: 3 s): the
    # rollout servers drain and the learner saves its step first
    wait = {"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": str(int(train.stop_grace_s * 3 + 30))}}
    argv = ["ray", "job", "submit", "--address", address, "--submission-id", submission]
    argv += ["--runtime-env-json", json.dumps(wait), "--no-wait", "--", *entry]
    script = train.run_dir / "launch" / "ray-submit.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("#!/bin/sh\n" + shlex.join(argv) + "\n")
    if not dry_run:
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=300, env=unowned_env()
            )
        except FileNotFoundError as e:
            raise SubmitError("ray not found: pip install 'agentgym-rl[ray]'") from e
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
            raise SubmitError(f"ray job submit failed: {lines[-1]}")
    job_id = None if dry_run else submission
    return _record(Launched(train.run_dir, "ray", script, job_id), address=address)


__all__ = [
    "Launched",
    "PlanError",
    "SubmitError",
    "launch_ray",
    "launch_slurm",
    "prepare",
    "stand_in",
]
