"""`launch --slurm` on a real SLURM cluster (`slurm_cluster`: Debian's slurmctld, slurmd and
munge on this host, three nodes, oversubscribed): the tiny run as a heterogeneous job (learner,
rollout and env components, one srun step per process) stopped by its time-limit warning,
requeued, resumed from its checkpoint and finished with the group accounting balanced (once in
CI, `AGENTGYM_RL_REQUEUES` times in a row by hand, each restart within 300 s);
`status` shows it; the same run as one allocation split by `srun --nodelist` (sites without
het jobs) starts, and `scancel` mid-run leaves no process behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from waiting import wait_until

from .launched_runs import (
    ROOT,
    children,
    cluster_config,
    launch,
    learner_step,
    logs,
    processes_mentioning,
    wait_for,
)
from .slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def _starts(run: Path) -> list[dict[str, object]]:
    path = run / "run.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def _srun_lines(run: Path) -> list[str]:
    """The srun command of each process, as its log's first line records it."""
    return [p.read_text().splitlines()[0] for p in (run / "logs").glob("*.log") if p.stat().st_size]


def _ended(cluster: SlurmCluster, job_id: str) -> bool:
    return cluster.state(job_id) in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")


REQUEUES = int(os.environ.get("AGENTGYM_RL_REQUEUES", "1"))
"""Time-limit warnings in a row (1 in CI; 10 by hand: `AGENTGYM_RL_REQUEUES=10
AGENTGYM_RL_REQUEUE_NUDGE=0 pytest tests/cluster/test_slurm_launch.py -k requeued -s`, which
prints each round's figures)."""
NUDGE = os.environ.get("AGENTGYM_RL_REQUEUE_NUDGE", "1") == "1"
"""Whether the test touches the pending job's record (see `_wait_restarted`)."""
RESTART_WITHIN_S = 300.0
STEPS = 8 * REQUEUES + 8  # a round trains about 7 steps by hand (two, then on until the
# warning); the stop trains what is already made (up to 5 steps once under CI's load: the
# warning landed at step 3 and the drain reached 8, the end), so 8 more leave the resumed run
# steps of its own


def _wait_restarted(cluster: SlurmCluster, job_id: str, restarts: int) -> float:
    """Seconds until the requeued job runs again (its restart counted, RUNNING). A requeued job
    passes through REQUEUED and COMPLETING, then waits pending until its old credential expires
    (`cred_expire` + 1 s). Only the backfill scheduler starts a het job, and it runs a pass only
    when a job, node or partition record changed since its last one: time passing the job's
    begin time changes none, so on an idle cluster the job waits for the next unrelated change
    (120 s after the requeue, every time, on this one). With `NUDGE` the test changes the job's
    comment while it is pending, as any activity of a real cluster would; it cannot start the job
    before its begin time (unlike `StartTime=now`, which started one in the second its old
    credential was revoked, and slurmctld failed it: "Job credential revoked")."""
    began = time.monotonic()

    def running() -> bool:
        record = cluster.job(job_id)
        assert record["JobState"] not in ("FAILED", "CANCELLED"), cluster.describe(job_id)
        if NUDGE and record["JobState"] == "PENDING":
            cluster.scontrol("update", f"JobId={job_id}", f"Comment=requeued-{restarts}")
        return record.get("Restarts") == str(restarts) and record["JobState"] == "RUNNING"

    wait_until(
        running,
        RESTART_WITHIN_S,
        f"restart {restarts}",
        poll_s=1.0,
        explain=lambda: cluster.describe(job_id),
    )
    return time.monotonic() - began


def test_slurm_run_requeued_at_its_time_limit_resumes_and_finishes(
    slurm_cluster: SlurmCluster, tiny_policy: Path, tmp_path: Path
) -> None:
    # no periodic checkpoint: the one the run resumes from is the one its stop saved
    config = cluster_config(tmp_path, tiny_policy, max_steps=STEPS, checkpoint_every=1000)
    # a small buffer: the groups the rollout server drains on the warning train a step or
    # two, not the rest of the run
    data = yaml.safe_load(config.read_text())
    data["rollout"]["buffer"] = {"max_in_flight": 2, "max_ready": 2}
    config.write_text(yaml.safe_dump(data))
    job = launch(["--slurm", str(config)], slurm_cluster.env)
    run: Path = job["run_dir"]
    job_id: str = job["job_id"]
    wait_for("at step 2", lambda: learner_step(run) >= 2, run, 600)
    names = {c["child"] for c in children(run)}
    assert names == {"env-babyai-0", "learn", "rollout-0"}
    assert (run / "secret").stat().st_mode & 0o777 == 0o600
    groups = {line.split("--het-group=")[1].split()[0] for line in _srun_lines(run)}
    assert groups == {"0", "1", "2"}  # a step in each component

    rounds = []
    for n in range(1, REQUEUES + 1):
        signalled = time.monotonic()
        slurm_cluster.cancel(job_id, signal="USR1", batch=True)  # the time-limit warning
        wait_for("stopped and requeued", lambda n=n: len(_starts(run)) >= n, run, 300)
        stopped = _starts(run)[n - 1]
        stop_s = time.monotonic() - signalled
        restart_s = _wait_restarted(slurm_cluster, job_id, n)
        assert stopped["outcome"] == "SIGUSR1" and int(str(stopped["step"])) < STEPS
        # the learner was stopped by SIGTERM to its task (srun's own SIGTERM would SIGKILL
        # it): it saved the step it stopped at
        assert (run / "checkpoints" / f"step_{stopped['step']}").is_dir()
        resumed = int(str(stopped["step"]))
        if n < REQUEUES:  # two steps of the resumed run before the next warning
            wait_for("stepping again", lambda r=resumed: learner_step(run) >= r + 2, run, 600)
        total_s = time.monotonic() - signalled
        rounds.append((n, resumed, stop_s, restart_s, total_s))
        on = f", two steps on {total_s:.1f} s after the warning" if n < REQUEUES else ""
        print(
            f"requeue {n}: stopped at step {resumed} in {stop_s:.1f} s, running again "
            f"{restart_s:.1f} s later{on}"
        )
    assert all(r[3] < RESTART_WITHIN_S for r in rounds), rounds
    wait_for(
        "finished",
        lambda: len(_starts(run)) == REQUEUES + 1 and _ended(slurm_cluster, job_id),
        run,
        900,
        explain=lambda: slurm_cluster.describe(job_id),
    )

    assert slurm_cluster.state(job_id) == "COMPLETED", logs(run)
    assert slurm_cluster.job(job_id).get("Restarts") == str(REQUEUES)
    last = _starts(run)[-1]
    assert last["outcome"] == "finished" and last["resume"] is True
    out = (run / "logs" / f"slurm-{job_id}.out").read_text()
    assert out.count(f"requeueing job {job_id}") == REQUEUES and "resuming it" in out
    learn_log = (run / "logs" / "learn.log").read_text()
    for stopped in _starts(run)[:-1]:
        checkpoint = run / "checkpoints" / f"step_{stopped['step']}"
        assert f"resumed from {checkpoint}" in learn_log
    ledger = (run / "learn" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in ledger][-1] == STEPS
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "finished" and summary["steps"] == STEPS
    assert summary["groups"]["balanced"] is True, summary["groups"]

    status = subprocess.run(
        [sys.executable, "-m", "agentgym_rl.cli", "status", str(run)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert status.returncode == 0, status.stderr
    assert f"slurm job {job_id}" in status.stdout and f"step {STEPS}/{STEPS}" in status.stdout
    assert "start 1 at" in status.stdout and "SIGUSR1" in status.stdout
    assert f"start {REQUEUES + 1} (resumed)" in status.stdout and "finished" in status.stdout
    assert processes_mentioning(str(run)) == []


def test_scancel_mid_run_leaves_no_process(
    slurm_cluster: SlurmCluster, tiny_policy: Path, tmp_path: Path
) -> None:
    config = cluster_config(tmp_path, tiny_policy, max_steps=50, name="cancelled", het_job=False)
    job = launch(["--slurm", str(config)], slurm_cluster.env)
    run: Path = job["run_dir"]
    wait_for(
        "running its rollout server",
        lambda: any(c["child"] == "rollout-0" for c in children(run)),
        run,
        600,
    )
    assert processes_mentioning(str(run))  # the run's processes, before
    assert "hetjob" not in (run / "launch" / "job.sbatch").read_text()
    hosts = {line.split("--nodelist=")[1].split()[0] for line in _srun_lines(run)}
    assert len(hosts) == 3  # learner, rollout and env on a node each of the one allocation
    slurm_cluster.cancel(job["job_id"])
    deadline = time.monotonic() + 90
    while processes_mentioning(str(run)) and time.monotonic() < deadline:
        time.sleep(1.0)
    assert processes_mentioning(str(run)) == [], logs(run)
    slurm_cluster.wait_state(job["job_id"], "CANCELLED", timeout_s=60)
