"""What a launcher may rely on from Slurm (22.05), proved on the real one-host cluster.

Each test submits a small batch script and watches marker files it writes and the processes
it starts (named after a unique marker, so `pgrep -f` finds exactly them).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from waiting import wait_until

from .slurm_cluster import SlurmCluster

pytestmark = pytest.mark.process


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/bash\n" + body.lstrip("\n"))
    return path


def _until(what: str, ready: Callable[[], bool], timeout_s: float) -> float:
    """`wait_until`, and the seconds it took."""
    began = time.monotonic()
    wait_until(ready, timeout_s, what)
    return time.monotonic() - began


def _pids(marker: str) -> list[str]:
    """`pgrep -af MARKER`: the processes (pid and command line) naming the marker."""
    out = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True, timeout=10)
    return out.stdout.splitlines()


def _marker() -> str:
    return f"agslurm_{uuid.uuid4().hex[:10]}"


def test_het_job_of_three_components(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """Three components (one node each) start together; the batch script sees each one's node
    list in SLURM_JOB_NODELIST_HET_GROUP_<n>; `srun --het-group=N --overlap` runs on any of
    them, and steps of two groups run at the same time."""
    script = _script(
        tmp_path / "het.sh",
        f"""
#SBATCH --nodes=1 --ntasks=1
#SBATCH hetjob
#SBATCH --nodes=1 --ntasks=1
#SBATCH hetjob
#SBATCH --nodes=1 --ntasks=1
cd {tmp_path}
env | grep '^SLURM' | sort > env.txt
srun --het-group=1 --nodes=1 --ntasks=1 --overlap hostname > hostname.txt 2> hostname.err
for g in 1 2; do
  srun --het-group=$g --nodes=1 --ntasks=1 --overlap \\
    bash -c 'echo $SLURMD_NODENAME; date +%s.%N; sleep 3; date +%s.%N' > step$g.txt 2> step$g.err &
done
wait
""",
    )
    job = slurm_cluster.sbatch(script, f"--output={tmp_path}/job.out")
    slurm_cluster.wait_state(job, "COMPLETED", timeout_s=45)

    env = dict(
        line.split("=", 1)
        for line in (tmp_path / "env.txt").read_text().splitlines()
        if "=" in line
    )
    groups = [env[f"SLURM_JOB_NODELIST_HET_GROUP_{g}"] for g in range(3)]
    assert sorted(groups) == sorted(slurm_cluster.nodes)  # a node each (see slurm_cluster.py)
    assert env["SLURM_HET_SIZE"] == "3"
    assert env["SLURM_JOB_NODELIST"] == groups[0]  # without a suffix: component 0 only
    assert [env[f"SLURM_JOB_ID_HET_GROUP_{g}"] for g in range(3)] == [
        str(job + g) for g in range(3)
    ]
    # the pre-20.02 names are still set alongside
    assert [env[f"SLURM_JOB_NODELIST_PACK_GROUP_{g}"] for g in range(3)] == groups

    assert (tmp_path / "hostname.txt").read_text().strip() == socket.gethostname()
    spans = []
    for g in (1, 2):
        node, start, end = (tmp_path / f"step{g}.txt").read_text().split()
        assert node == groups[g]
        spans.append((float(start), float(end)))
        assert "temporarily disabled" not in (tmp_path / f"step{g}.err").read_text()
    (start1, end1), (start2, end2) = spans
    assert max(start1, start2) < min(end1, end2), f"steps ran one after the other: {spans}"


def test_signal_to_the_batch_shell(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """`scancel --signal=USR1 --batch` reaches the batch shell's trap (the job asked for
    `--signal=B:USR1@60`, the warning a run gets before its time limit)."""
    ready, got = tmp_path / "ready", tmp_path / "got"
    script = _script(
        tmp_path / "sig.sh",
        f"""
#SBATCH --signal=B:USR1@60
trap 'echo USR1 > {got}' USR1
touch {ready}
sleep 60 &
wait $!  # a trapped signal ends `wait` at once (a foreground sleep would not)
kill $!  # and the job ends well: COMPLETED
""",
    )
    job = slurm_cluster.sbatch(script, f"--output={tmp_path}/job.out")
    _until("the batch script is ready", ready.exists, 30)
    slurm_cluster.cancel(job, signal="USR1", batch=True)
    slurm_cluster.wait_state(job, "COMPLETED", timeout_s=15)
    assert got.read_text().strip() == "USR1"


REQUEUE_SELF = """
#SBATCH --requeue
echo "${{SLURM_RESTART_COUNT:-unset}} $(date +%s.%N)" >> {runs}
if [ -z "$SLURM_RESTART_COUNT" ]; then
  date +%s.%N > {requeued}
  scontrol requeue "$SLURM_JOB_ID"  # ends this run (SIGTERM)
  sleep 60 & wait $!
fi
"""


def _runs(path: Path) -> list[tuple[str, float]]:
    if not path.exists():
        return []
    return [(c, float(t)) for c, t in (line.split() for line in path.read_text().splitlines())]


def test_requeue_self_runs_again_after_cred_expire(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """A job that requeues itself runs again, SLURM_RESTART_COUNT=1; but not before Slurm's
    credential lifetime (`AuthInfo=cred_expire`, 120 s by default) + 1 s has passed."""
    runs, requeued = tmp_path / "runs", tmp_path / "requeued"
    script = _script(tmp_path / "rq.sh", REQUEUE_SELF.format(runs=runs, requeued=requeued))
    job = slurm_cluster.sbatch(script, f"--output={tmp_path}/job.out")
    _until("the second run", lambda: len(_runs(runs)) >= 2, slurm_cluster.cred_expire + 30)
    (first, _), (second, restarted) = _runs(runs)
    assert (first, second) == ("unset", "1")
    delay = restarted - float(requeued.read_text())
    print(f"requeue -> second run: {delay:.1f} s (cred_expire={slurm_cluster.cred_expire})")
    assert slurm_cluster.cred_expire <= delay <= slurm_cluster.cred_expire + 8
    slurm_cluster.wait_state(job, "COMPLETED", timeout_s=15)
    assert slurm_cluster.job(job)["Restarts"] == "1"


def test_requeued_job_starts_at_once_with_start_time_now(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Once the requeued job is pending again (Reason=BeginTime), `scontrol update
    StartTime=now` from outside makes it eligible at once (`scontrol release` would not)."""
    runs, requeued = tmp_path / "runs", tmp_path / "requeued"
    script = _script(tmp_path / "rq.sh", REQUEUE_SELF.format(runs=runs, requeued=requeued))
    job = slurm_cluster.sbatch(script, f"--output={tmp_path}/job.out")

    def pending_again() -> bool:
        record = slurm_cluster.job(job)
        return record["JobState"] == "PENDING" and record["Restarts"] == "1"

    _until("the job is pending again", pending_again, 30)
    assert slurm_cluster.job(job)["Reason"] == "BeginTime"
    slurm_cluster.scontrol("release", str(job))  # no effect on the begin time
    time.sleep(1.5)
    assert slurm_cluster.job(job)["Reason"] == "BeginTime"
    updated = time.time()
    slurm_cluster.scontrol("update", f"JobId={job}", "StartTime=now")
    _until("the second run", lambda: len(_runs(runs)) >= 2, 10)
    delay = _runs(runs)[1][1] - updated
    print(f"StartTime=now -> second run: {delay:.1f} s")
    assert delay < 5


@pytest.mark.parametrize("setsid_stubborn", [False, True], ids=["step-and-child", "orphan"])
def test_scancel_leaves_no_process(
    slurm_cluster: SlurmCluster, tmp_path: Path, setsid_stubborn: bool
) -> None:
    """`scancel JOB` ends the batch script, its srun step's remote task and its background
    child within KillWait (+ slack); with proctrack/cgroup also a child in a session of its own
    that ignores SIGTERM (as `start_new_session=True` children are)."""
    if setsid_stubborn and slurm_cluster.proctrack != "proctrack/cgroup":
        pytest.skip(
            f"{slurm_cluster.proctrack}: a setsid child that ignores SIGTERM outlives its job "
            "(only proctrack/cgroup, cgroup v1 freezer here, kills it)"
        )
    mark, ready = _marker(), tmp_path / "ready"
    orphan = (
        f"setsid bash -c 'trap \"\" TERM; exec -a {mark}_orphan sleep 1000' &"
        if setsid_stubborn
        else ""
    )
    script = _script(
        tmp_path / "kill.sh",
        f"""
srun --overlap --ntasks=1 bash -c 'exec -a {mark}_step sleep 1000' &
bash -c 'exec -a {mark}_child sleep 1000' &
{orphan}
touch {ready}
wait
""",
    )
    job = slurm_cluster.sbatch(script, f"--output={tmp_path}/job.out")
    expected = {"step", "child"} | ({"orphan"} if setsid_stubborn else set())

    def running() -> set[str]:  # the renamed sleeps: "PID MARK_step 1000"
        return {p.split()[1].removeprefix(f"{mark}_") for p in _pids(f"^{mark}_")}

    _until(f"processes {sorted(expected)} run", lambda: expected <= running(), 30)
    slurm_cluster.cancel(job)
    took = _until(
        "no process of the job is left", lambda: not _pids(mark), slurm_cluster.kill_wait + 10
    )
    print(f"scancel -> last process gone: {took:.2f} s")
    slurm_cluster.wait_state(job, "CANCELLED", timeout_s=15)


def test_sigterm_to_srun_kills_its_tasks(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """SIGTERM to an `srun` client is not forwarded: srun answers it with SIGKILL to its tasks
    (their TERM trap never runs), at once; srun exits 137. (SIGUSR1/2 and the like are
    forwarded as they are; SIGINT only with --disable-status/-X; `scancel --signal=TERM JOB.STEP`
    delivers SIGTERM: see the next test.)"""
    mark, ready, trapped = _marker(), tmp_path / "ready", tmp_path / "trapped"
    pid_file, rc_file = tmp_path / "srun.pid", tmp_path / "srun.rc"
    script = _script(
        tmp_path / "fwd.sh",
        f"""
srun --overlap --ntasks=1 bash -c 'trap "echo TERM > {trapped}; exit 3" TERM; touch {ready}
  (exec -a {mark}_task sleep 300) & wait' &
echo $! > {pid_file}
wait $!
echo $? > {rc_file}
""",
    )
    job = slurm_cluster.sbatch(script, f"--output={tmp_path}/job.out")
    _until("the remote task runs", lambda: ready.exists() and bool(_pids(f"^{mark}_task")), 30)
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    took = _until("srun and its task are gone", lambda: not _pids(mark), 10)
    print(f"SIGTERM to srun -> srun and its remote task gone: {took:.2f} s")
    _until("the batch script saw srun exit", rc_file.exists, 10)
    assert rc_file.read_text().strip() == "137"  # 128 + SIGKILL
    assert not trapped.exists(), "the task got SIGTERM, not SIGKILL"
    slurm_cluster.wait_state(job, "COMPLETED", timeout_s=15)


def test_scancel_signal_to_a_step(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """`scancel --signal=TERM JOB.0` delivers SIGTERM to the step's tasks (their trap runs);
    so does SIGUSR1 sent to the srun client, forwarded as it is."""
    ready, trapped = tmp_path / "ready", tmp_path / "trapped"
    task = (
        f'trap "echo TERM >> {trapped}; exit 3" TERM; trap "echo USR1 >> {trapped}" USR1; '
        f"touch {ready}$SLURM_STEP_ID; while true; do sleep 0.2; done"
    )
    script = _script(
        tmp_path / "step.sh",
        f"""
srun --overlap --ntasks=1 bash -c '{task}' &
echo $! > {tmp_path}/srun0.pid
wait
""",
    )
    job = slurm_cluster.sbatch(script, f"--output={tmp_path}/job.out")
    _until("step 0 runs", lambda: Path(f"{ready}0").exists(), 30)
    os.kill(int((tmp_path / "srun0.pid").read_text()), signal.SIGUSR1)
    _until("the task trapped USR1", lambda: trapped.exists() and "USR1" in trapped.read_text(), 10)
    slurm_cluster.cancel(f"{job}.0", signal="TERM")
    _until("the task trapped TERM", lambda: "TERM" in trapped.read_text(), 10)
    slurm_cluster.wait_state(job, "COMPLETED", timeout_s=15)
