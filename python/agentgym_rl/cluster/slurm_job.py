"""Inside a SLURM job: find the nodes, start every process as an `srun` step, supervise them.

Contract: `run_slurm_job(run_dir)` runs in the batch shell (`agentgym-rl job --slurm RUN_DIR`,
the last line of the script `launch --slurm` writes). It reads the run's effective config
(`run_dir/configs/train.yaml`), takes each role's nodes from SLURM's variables (a het job's
`SLURM_JOB_NODELIST_HET_GROUP_<i>` in `ROLES` order, or one allocation's `SLURM_JOB_NODELIST`
split in that order), the job's port block from `SLURM_JOB_ID`, and the run's secret from
`run_dir/secret` (made 0600 on the first start, kept by a requeued one). It plans the run on
those nodes (`plan_run` with a `Placement`), and supervises it as `train` does on one machine,
each process one `srun` step on its node(s) with its own log under `run_dir/logs/`: env and
rollout servers restarted when they die (`restart.max_restarts`), everything stopped when the
learner exits. A job that finds the run started before (`run_dir/run.jsonl`: a requeued or
resubmitted job) resumes it as `train --resume`. On SIGUSR1 (the script's time-limit warning)
the processes stop in order (the learner checkpoints its step) and the job requeues itself when
`cluster.slurm.requeue`; on SIGTERM (`scancel`) they stop in order and the job ends.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from agentgym_rl.auth import kept_secret
from agentgym_rl.cluster.hostlist import expand_hostlist
from agentgym_rl.cluster.slurm_script import ROLES
from agentgym_rl.config.cluster import ClusterConfig
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.processes.child import Child, ChildSpec
from agentgym_rl.processes.ports import JobPorts
from agentgym_rl.report.records import read_jsonl
from agentgym_rl.supervise.placement import Placement
from agentgym_rl.supervise.plan import plan_run
from agentgym_rl.supervise.run import run_plan
from agentgym_rl.supervise.supervisor import EXIT, Launch

_GROUP = {"init": 0, "learn": 0, "rollout": 1, "env": 2}
"""Het-job component of each child role (`ROLES` order)."""


class JobError(RuntimeError):
    """The job's environment does not describe the nodes the config asks for."""


def role_nodes(environ: Mapping[str, str], cluster: ClusterConfig) -> dict[str, list[str]]:
    """Each role's hosts, from a het job's per-component node lists or one allocation's."""
    het = [environ.get(f"SLURM_JOB_NODELIST_HET_GROUP_{i}") for i in range(len(ROLES))]
    if all(het):
        try:
            return {r: expand_hostlist(str(nodes)) for r, nodes in zip(ROLES, het, strict=True)}
        except ValueError as e:
            raise JobError(str(e)) from e
    listed = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not listed:
        raise JobError("no SLURM_JOB_NODELIST: `agentgym-rl job --slurm` runs inside a job")
    try:
        hosts = expand_hostlist(listed)
    except ValueError as e:
        raise JobError(str(e)) from e
    wanted = [getattr(cluster, role).nodes for role in ROLES]
    if len(hosts) < sum(wanted):
        raise JobError(
            f"the job has {len(hosts)} node(s) ({listed}) but the cluster section asks for "
            f"{sum(wanted)} ({', '.join(f'{n} {r}' for r, n in zip(ROLES, wanted, strict=True))})"
        )
    out, start = {}, 0
    for role, n in zip(ROLES, wanted, strict=True):
        out[role], start = hosts[start : start + n], start + n
    return out


def node_addresses(hosts: list[str]) -> dict[str, str]:
    """Node name -> NodeAddr for the nodes whose address is not their name (`scontrol show
    node`; a site that names nodes as they resolve needs none). Empty where scontrol fails."""
    try:
        done = subprocess.run(
            ["scontrol", "show", "node", "-o", ",".join(hosts)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    out = {}
    for line in done.stdout.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        name, addr = fields.get("NodeName"), fields.get("NodeAddr")
        if name and addr and addr != name:
            out[name] = addr
    return out


class SrunChild(Child):
    """A child that is an `srun` step. srun answers SIGTERM by killing its tasks (SIGKILL: no
    drain, no checkpoint), so `terminate` asks SLURM to deliver SIGTERM to the step's tasks
    themselves (`scancel --signal=TERM <step>`, the step found by its unique name); only where
    the step cannot be found does srun get the SIGTERM."""

    def __init__(self, spec: ChildSpec, log_dir: Path, env: dict[str, str], step: str) -> None:
        super().__init__(spec, log_dir, env)
        self.step_name = step

    def _step_id(self) -> str | None:
        try:
            done = subprocess.run(
                ["squeue", "--noheader", "--steps", "--format=%i %j"],
                capture_output=True,
                text=True,
                timeout=30,
                env=self.env,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        for line in done.stdout.splitlines():
            step_id, _, name = line.strip().partition(" ")
            if name.strip() == self.step_name:
                return step_id
        return None

    def terminate(self) -> None:
        if not self.running():
            return
        step = self._step_id()
        if step is not None:
            done = subprocess.run(
                ["scancel", "--signal=TERM", step], capture_output=True, timeout=30, env=self.env
            )
            if done.returncode == 0:
                return
        super().terminate()


def srun_launch(het_job: bool, job_id: int = 0) -> Launch:
    """Children as `srun` steps: one task per host of the child, sharing the allocation's CPUs
    and GPUs with the other steps (`--overlap`; a rollout server's device is its own
    CUDA_VISIBLE_DEVICES), its whole environment exported (the secret included), each step
    named `<process>@<job>` (how `SrunChild` finds it)."""

    def launch(spec: ChildSpec, log_dir: Path, env: dict[str, str]) -> Child:
        hosts = spec.hosts or (spec.host,)
        step = f"{spec.name}@{job_id}"
        prefix = ["srun"]
        prefix += [f"--het-group={_GROUP[spec.role]}"] if het_job else []
        prefix += [
            f"--nodes={len(hosts)}",
            f"--ntasks={len(hosts)}",
            "--ntasks-per-node=1",
            f"--nodelist={','.join(hosts)}",
            "--overlap",
            "--kill-on-bad-exit=1",
            f"--job-name={step}",
            "--export=ALL",
        ]
        shell = f"{shlex.join(prefix)} {spec.shell}"  # what the log's start line shows
        return SrunChild(replace(spec, argv=[*prefix, *spec.argv], shell=shell), log_dir, env, step)

    return launch


def run_slurm_job(
    run_dir: Path,
    environ: Mapping[str, str] = os.environ,
    say: Callable[[str], None] = print,
) -> int:
    """Run (or resume) the launched run in `run_dir` inside its SLURM job; the exit code."""
    config = TrainConfig.from_yaml(run_dir / "configs" / "train.yaml")
    train = config.model_copy(update={"run_dir": run_dir})
    cluster = train.cluster or ClusterConfig()
    job_id = int(environ.get("SLURM_JOB_ID", "0"))
    nodes = role_nodes(environ, cluster)
    say(f"job: SLURM job {job_id}, nodes " + "; ".join(f"{r} {','.join(nodes[r])}" for r in ROLES))
    placement = Placement.spread(
        nodes["env"],
        nodes["rollout"],
        nodes["learner"],
        rollout_servers=train.rollout_servers,
        rollout_gpus_per_node=cluster.rollout.gpus_per_node,
        addresses=node_addresses(sorted({h for hosts in nodes.values() for h in hosts})),
    )
    ports = JobPorts.for_job(job_id, cluster.port_base, cluster.ports_per_job)
    resume = (run_dir / "run.jsonl").exists()
    restarts = environ.get("SLURM_RESTART_COUNT", "0")
    if resume:
        say(f"job: the run started before (restart count {restarts}): resuming it")
    plan = plan_run(train, resume=resume, placement=placement, ports=ports)
    code = run_plan(
        plan,
        resume=resume,
        say=say,
        who="job",
        secret=kept_secret(run_dir / "secret"),
        launch=srun_launch(
            all(f"SLURM_JOB_NODELIST_HET_GROUP_{i}" in environ for i in range(3)), job_id
        ),
        signals=(signal.SIGINT, signal.SIGTERM, signal.SIGUSR1),
    )
    learned = read_jsonl(run_dir / "learn" / "metrics.jsonl")
    if code == EXIT["SIGUSR1"] and learned and learned[-1].get("step") == train.learn.max_steps:
        say("job: the learner reached its last step while the run stopped; nothing to requeue")
        return 0
    if code == EXIT["SIGUSR1"] and cluster.slurm.requeue and job_id:
        say(f"job: stopped before the time limit, checkpointed; requeueing job {job_id}")
        done = subprocess.run(["scontrol", "requeue", str(job_id)], capture_output=True, text=True)
        if done.returncode != 0:
            say(f"job: scontrol requeue failed: {done.stderr.strip()}; resubmit the script")
    return code


__all__ = ["JobError", "SrunChild", "node_addresses", "role_nodes", "run_slurm_job", "srun_launch"]
