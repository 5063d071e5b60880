"""A Ray job's driver: one actor per process, placed where its role's resources are.

Contract: `run_ray_job(run_dir)` runs as the entrypoint of the Ray job `launch --ray` submits
(`agentgym-rl job --ray RUN_DIR`). It connects to the job's cluster, places one `ProcessActor`
per process of the run: an env server on a node with one unit of `cluster.ray.env_resource`, a
rollout server with one GPU and the learner with `learner_procs` GPUs (none when the config's
nodes have no GPUs), each actor named `agentgym-rl:<run>:<process>` so Ray's state API lists them.
It plans the run on the nodes the actors landed on (`Placement`), then supervises it as `train`
does, each process started by its actor on that node (`RayChild`): env and rollout servers
restarted when their process dies, everything stopped when the learner exits or the job is
stopped (`ray job stop`: SIGTERM to this driver; actors, and the processes they started, end
with the job). The actors only launch and watch: groups and weights flow over the run's own
ZeroMQ streams, signed with the run's secret (`run_dir/secret`, 0600, which every node reads
from the shared run folder through its process's environment). A run that started before
(`run_dir/run.jsonl`) is resumed. A learner on several nodes gets an actor per node (its share
of the GPUs), each running the node's torchrun, supervised as one process (`ChildGroup`).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentgym_rl.auth import kept_secret
from agentgym_rl.cluster.ray_child import ChildGroup, ProcessActor, RayChild
from agentgym_rl.config.cluster import ClusterConfig
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.processes.child import ChildSpec, Launched
from agentgym_rl.processes.ports import JobPorts
from agentgym_rl.supervise.placement import Placement
from agentgym_rl.supervise.plan import plan_run
from agentgym_rl.supervise.run import run_plan
from agentgym_rl.supervise.supervisor import Launch


class RayJobError(RuntimeError):
    """The run cannot be placed on this Ray cluster (the message says what is missing)."""


def _actors(train: TrainConfig, cluster: ClusterConfig, prefix: str) -> dict[str, Any]:
    """One actor per process (by the name the plan gives it), placed by its role's resources."""
    import ray

    actor = ray.remote(num_cpus=0, max_restarts=0)(ProcessActor)
    gpus = cluster.rollout.gpus_per_node > 0
    out: dict[str, Any] = {}
    for spec in train.env_servers:
        for r in range(spec.replicas):
            name = f"env-{spec.name}-{r}"
            res = {cluster.ray.env_resource: 1}
            out[name] = actor.options(name=prefix + name, resources=res).remote()
    for i in range(train.rollout_servers):
        name = f"rollout-{i}"
        out[name] = actor.options(name=prefix + name, num_gpus=1 if gpus else 0).remote()
    nodes = cluster.learner.nodes
    learner_gpus = train.learner_procs // nodes if cluster.learner.gpus_per_node else 0
    for i in range(nodes):
        name = "learn" if nodes == 1 else f"learn-{i}"
        out[name] = actor.options(name=prefix + name, num_gpus=learner_gpus).remote()
    return out


def _node_ips(actors: dict[str, Any], timeout_s: float) -> dict[str, str]:
    import ray
    from ray.exceptions import GetTimeoutError

    names = list(actors)
    try:
        ips = ray.get([actors[n].node_ip.remote() for n in names], timeout=timeout_s)
    except GetTimeoutError as e:
        raise RayJobError(
            f"not every process could be placed within {timeout_s:.0f}s: the cluster lacks "
            "the resources one of them asks for (`ray status` shows what is free: GPUs for the "
            "learner and rollout servers, the env resource for env servers)"
        ) from e
    return dict(zip(names, (str(ip) for ip in ips), strict=True))


def ray_launch(actors: dict[str, Any]) -> Launch:
    """Children started by their actors (model creation by the learner's first, before it);
    a learner on several nodes is one `ChildGroup` of a torchrun per node (`learn-<i>.log`)."""

    def launch(spec: ChildSpec, log_dir: Path, env: dict[str, str]) -> Launched:
        if spec.role == "learn" and len(spec.hosts) > 1:
            members: list[Launched] = [
                RayChild(replace(spec, name=f"learn-{i}"), log_dir, env, actors[f"learn-{i}"])
                for i in range(len(spec.hosts))
            ]
            return ChildGroup(spec, members)
        first = "learn" if "learn" in actors else "learn-0"
        return RayChild(spec, log_dir, env, actors[first if spec.role == "init" else spec.name])

    return launch


def run_ray_job(run_dir: Path, say: Callable[[str], None] = print) -> int:
    """Run (or resume) the launched run in `run_dir` as this Ray job's driver; the exit code."""
    import ray

    config = TrainConfig.from_yaml(run_dir / "configs" / "train.yaml")
    train = config.model_copy(update={"run_dir": run_dir})
    cluster = train.cluster or ClusterConfig()
    ray.init(log_to_driver=False)
    job_id = int(ray.get_runtime_context().get_job_id(), 16)
    actors = _actors(train, cluster, f"agentgym-rl:{run_dir.name}:")
    ips = _node_ips(actors, train.startup_timeout_s)
    env_ips = [ip for name, ip in ips.items() if name.startswith("env-")]
    rollout_ips = [ips[f"rollout-{i}"] for i in range(train.rollout_servers)]
    say(f"job: Ray job {job_id}: placed " + ", ".join(f"{n}@{ip}" for n, ip in ips.items()))
    learner_ips = [ip for name, ip in ips.items() if name.split("-")[0] == "learn"]
    placement = Placement(
        tuple(env_ips), tuple(rollout_ips), tuple(learner_ips), train.rollout_servers, bind_all=True
    )
    ports = JobPorts.for_job(job_id, cluster.port_base, cluster.ports_per_job)
    resume = (run_dir / "run.jsonl").exists()
    if resume:
        say("job: the run started before: resuming it")
    plan = plan_run(train, resume=resume, placement=placement, ports=ports)
    return run_plan(
        plan,
        resume=resume,
        say=say,
        who="job",
        secret=kept_secret(run_dir / "secret"),
        launch=ray_launch(actors),
        signals=(signal.SIGINT, signal.SIGTERM),
    )


__all__ = ["RayJobError", "ray_launch", "run_ray_job"]
