"""The batch script `agentgym-rl launch --slurm` writes and submits.

Contract: `batch_script(train)` is the whole script for the run `train` describes
(its `cluster:` section, defaults where it has none): job-wide options first (name, output in
`run_dir/logs/slurm-<job>.out`, time, the time-limit warning `--signal=B:USR1@<grace>`,
`--requeue`), then the nodes of each role, as one heterogeneous job with a component per role
in the order of `ROLES` (learner, rollout, env) or, with `slurm.het_job: false`, as one
allocation of all the nodes. Its body runs the site's `setup` lines and then `agentgym-rl job`
in the batch shell, which finds the nodes, starts one `srun` step per process and supervises
them (`slurm_job.py`). USR1, not TERM, is the time-limit warning: `scancel` sends TERM, and only
the warning may requeue the job. `submit(path)` runs `sbatch --parsable` and returns the job id.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from agentgym_rl.config.cluster import ClusterConfig, RoleNodes, SlurmSettings
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.processes.ownership import unowned_env

ROLES = ("learner", "rollout", "env")
"""The roles in component order: the learner's component runs the batch shell."""


class SubmitError(RuntimeError):
    """sbatch refused the script (its message says why)."""


def _role_lines(role: str, nodes: RoleNodes, what: str) -> list[str]:
    lines = [
        f"# {role}: {what}",
        f"#SBATCH --nodes={nodes.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --cpus-per-task={nodes.cpus_per_node}",
    ]
    if nodes.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={nodes.gpus_per_node}")
    return lines


def _site_lines(slurm: SlurmSettings) -> list[str]:
    """Options every component repeats (a het job's components do not inherit them)."""
    lines = [f"#SBATCH --time={slurm.time}"]
    if slurm.partition:
        lines.append(f"#SBATCH --partition={slurm.partition}")
    if slurm.account:
        lines.append(f"#SBATCH --account={slurm.account}")
    return lines + [f"#SBATCH {line}" for line in slurm.extra]


def _what(train: TrainConfig) -> dict[str, str]:
    replicas = sum(spec.replicas for spec in train.env_servers)
    names = ", ".join(spec.name for spec in train.env_servers)
    return {
        "learner": f"{train.learner_procs} learner rank(s) under torchrun, global rank 0 binds",
        "rollout": f"{train.rollout_servers} rollout server(s), one vLLM engine each",
        "env": f"{replicas} env server(s): {names}",
    }


def batch_script(train: TrainConfig, python: str = sys.executable) -> str:
    """The sbatch script of `train` (whose effective config the job reads back from
    `run_dir/configs/train.yaml`)."""
    cluster = train.cluster or ClusterConfig()
    slurm = cluster.slurm
    run_dir = train.run_dir.resolve()
    name = run_dir.name or "run"
    header = [
        "#!/bin/bash",
        f"# agentgym-rl launch --slurm: run {run_dir}",
        "# Resubmit as it is with `sbatch` (the job resumes from the run folder's checkpoints).",
        f"#SBATCH --job-name=agentgym-rl-{name}",
        f"#SBATCH --output={run_dir}/logs/slurm-%j.out",
        "#SBATCH --open-mode=append",
        f"#SBATCH --signal=B:USR1@{slurm.signal_grace_s}",
    ]
    header += ["#SBATCH --requeue"] if slurm.requeue else ["#SBATCH --no-requeue"]
    what = _what(train)
    roles = {"learner": cluster.learner, "rollout": cluster.rollout, "env": cluster.env}
    if slurm.het_job:
        for i, role in enumerate(ROLES):
            if i:
                header.append("#SBATCH hetjob")
            header += _role_lines(role, roles[role], what[role]) + _site_lines(slurm)
    else:
        total = sum(nodes.nodes for nodes in roles.values())
        gpus = max(nodes.gpus_per_node for nodes in roles.values())
        cpus = max(nodes.cpus_per_node for nodes in roles.values())
        one = RoleNodes(nodes=total, gpus_per_node=gpus, cpus_per_node=cpus)
        order = ", ".join(f"{roles[r].nodes} {r}" for r in ROLES)
        header += _role_lines("all roles", one, f"nodes in order: {order}")
        header += _site_lines(slurm)
    job = [python, "-m", "agentgym_rl.cli", "job", "--slurm", str(run_dir)]
    body = [
        "",
        "set -euo pipefail",
        f"cd {shlex.quote(str(Path.cwd()))}",
        *slurm.setup,
        "# finds the nodes, starts one srun step per process and supervises them",
        "exec " + shlex.join(job),
    ]
    return "\n".join(header + body) + "\n"


def submit(script: Path, env: dict[str, str] | None = None) -> int:
    """Submit `script` with sbatch; the job id. Raises `SubmitError` with sbatch's reason. The
    job gets `env` (default: this process's) without the owners' marks: sbatch exports the
    submitter's environment, and the job must outlive the command that submitted it."""
    try:
        done = subprocess.run(
            ["sbatch", "--parsable", str(script)],
            capture_output=True,
            text=True,
            env=unowned_env(env),
            timeout=120,
        )
    except FileNotFoundError as e:
        raise SubmitError("sbatch not found: run launch --slurm on a SLURM login node") from e
    if done.returncode != 0:
        raise SubmitError(f"sbatch refused {script}: {done.stderr.strip() or done.stdout.strip()}")
    return int(done.stdout.strip().split(";")[0])


__all__ = ["ROLES", "SubmitError", "batch_script", "submit"]
