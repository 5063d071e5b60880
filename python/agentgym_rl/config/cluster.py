"""Typed `cluster:` section of a train config: where each role runs when `agentgym-rl launch`
takes the run to a cluster (torch-free: pydantic only).

Contract: the same train config runs on one machine (`train`, which ignores this section) and on
a cluster (`launch --slurm` / `launch --ray`). The section says how many nodes each role gets
and what a node of that role holds; the counts of processes stay where they are
(`rollout_servers`, `learner_procs`, `env_servers[].replicas`) and are spread evenly over the
role's nodes. `ClusterConfig.check(train)` lists what does not fit (a learner whose ranks do not
divide over its nodes, more rollout servers on a node than it has GPUs).
"""

from __future__ import annotations

from pydantic import Field

from agentgym_rl.config.base import ConfigModel


class RoleNodes(ConfigModel):
    """The nodes of one role."""

    nodes: int = Field(default=1, ge=1, le=4096)
    """Nodes given to this role."""
    gpus_per_node: int = Field(default=0, ge=0, le=64)
    """GPUs each node of this role has (0: CPU only, as on a test cluster)."""
    cpus_per_node: int = Field(default=1, ge=1)
    """CPUs each node of this role asks for (SLURM `--cpus-per-task` of its one task)."""


class SlurmSettings(ConfigModel):
    """How `launch --slurm` writes and submits the batch script."""

    partition: str | None = None
    """`#SBATCH --partition` (None: the site's default)."""
    account: str | None = None
    """`#SBATCH --account` (None: the user's default)."""
    time: str = "24:00:00"
    """`#SBATCH --time`, as SLURM reads it (`HH:MM:SS`, `D-HH:MM:SS`)."""
    het_job: bool = True
    """One heterogeneous job, a component per role (learner, rollout, env). False: one
    allocation of all the nodes, split by `srun --nodelist` (for sites without het jobs)."""
    requeue: bool = True
    """On the time-limit warning, checkpoint, stop and requeue the job; the requeued job resumes
    from the newest checkpoint (as `train --resume`)."""
    signal_grace_s: int = Field(default=300, ge=30)
    """Seconds before the time limit at which SLURM warns the job (`--signal=B:USR1@...`): long
    enough for the learner to finish its step and save."""
    extra: list[str] = Field(default_factory=list)
    """More `#SBATCH` lines for every component, without the prefix (e.g. `--qos=high`,
    `--exclusive`, `--constraint=h100`)."""
    setup: list[str] = Field(default_factory=list)
    """Shell lines the script runs before anything starts (e.g. `module load cuda`,
    `source ~/venv/bin/activate`)."""


class RaySettings(ConfigModel):
    """How `launch --ray` places the roles."""

    env_resource: str = Field(default="env_host", min_length=1)
    """Custom resource of nodes that may run env servers (`ray start --resources
    '{"env_host": 8}'`); each env server takes one unit."""


class ClusterConfig(ConfigModel):
    """The nodes of a run on a cluster: one entry per role."""

    learner: RoleNodes = RoleNodes()
    """The learner's nodes (`learner_procs` ranks spread evenly; torchrun on each)."""
    rollout: RoleNodes = RoleNodes()
    """The rollout servers' nodes (`rollout_servers` spread evenly, one GPU each when the
    nodes have GPUs)."""
    env: RoleNodes = RoleNodes()
    """The env servers' hosts (every env's replicas spread evenly)."""
    port_base: int = Field(default=20000, ge=1024, le=60000)
    """First port of the run's port blocks: a job takes a block of `ports_per_job` ports from
    here (up to the OS's ephemeral range, 32768), chosen by its job id, so two jobs on one node
    do not collide; above Ray's worker ports (10002-19999 by default)."""
    ports_per_job: int = Field(default=64, ge=8, le=4096)
    """Ports in one job's block (two per env server, two for the learner, one per rollout
    server's agent endpoint, one for torchrun's rendezvous)."""
    slurm: SlurmSettings = SlurmSettings()
    """The batch script's settings."""
    ray: RaySettings = RaySettings()
    """Ray's placement settings."""

    def problems(self, learner_procs: int, rollout_servers: int) -> list[str]:
        """What the counts of processes do not fit in these nodes, one line each."""
        out = []
        if learner_procs % self.learner.nodes:
            out.append(
                f"cluster.learner.nodes: {self.learner.nodes} nodes for learner_procs="
                f"{learner_procs} ranks: the ranks must divide evenly over the nodes"
            )
        gpus = self.learner.gpus_per_node
        if gpus and learner_procs // self.learner.nodes > gpus:
            out.append(
                f"cluster.learner.gpus_per_node: {gpus}, but {learner_procs // self.learner.nodes}"
                " learner ranks per node (one GPU each): raise the nodes or the GPUs"
            )
        per_node = -(-rollout_servers // self.rollout.nodes)
        if rollout_servers < self.rollout.nodes:
            out.append(
                f"cluster.rollout.nodes: {self.rollout.nodes} nodes for rollout_servers="
                f"{rollout_servers}: a node would be idle"
            )
        gpus = self.rollout.gpus_per_node
        if gpus and per_node > gpus:
            out.append(
                f"cluster.rollout.gpus_per_node: {gpus}, but {per_node} rollout servers per node"
                " (one GPU each): raise rollout nodes or lower rollout_servers"
            )
        return out


__all__ = ["ClusterConfig", "RaySettings", "RoleNodes", "SlurmSettings"]
