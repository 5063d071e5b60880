"""The processes of a planned run: how each starts, where it runs, and the files `train` writes.

Contract: a `RunPlan` (of `processes.child.ChildSpec`s: each one process as a user would start
it) is every process of a run in start order with
the configs they read. `assemble` makes the learner's, rollout servers' and model creation's
specs from the composed configs (`plan.py` composes them); `write_plan` writes
`run_dir/configs/`.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym_rl.config.flags import to_flags
from agentgym_rl.config.learn import LearnConfig
from agentgym_rl.config.rollout import RolloutConfig
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.processes.child import ChildSpec, cli_argv, cli_spec
from agentgym_rl.supervise.placement import Placement


@dataclass
class RunPlan:
    """Every process of the run, in start order, and the configs they read."""

    train: TrainConfig
    init: ChildSpec | None
    envs: list[ChildSpec]
    learn: ChildSpec
    rollouts: list[ChildSpec]
    learn_config: LearnConfig
    rollout_configs: list[RolloutConfig]
    has_eval: bool
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """File name under run_dir/configs -> the composed YAML mapping."""

    @property
    def run_dir(self) -> Path:
        return self.train.run_dir


def _learner_child(
    train: TrainConfig,
    learn_config: LearnConfig,
    args: list[str],
    place: Placement,
    rdzv: int | None,
) -> ChildSpec:
    """The learner: `learn` itself for one rank; torchrun for several, standalone on one node,
    with a c10d rendezvous at the first host's `rdzv` port across nodes (one torchrun a node)."""
    n, nodes = train.learner_procs, len(place.learner_hosts)
    if rdzv is not None:
        run_id = train.run_dir.name or "agentgym-rl"
        launcher = [
            f"--nnodes={nodes}",
            f"--nproc_per_node={n // nodes}",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint={place.reach(place.learner_host)}:{rdzv}",
            f"--rdzv_id={run_id}",
        ]
    elif n > 1:
        launcher = ["--standalone", f"--nproc_per_node={n}"]
    else:
        launcher = []
    if launcher:
        argv = [sys.executable, "-m", "torch.distributed.run", *launcher, "-m", "agentgym_rl.cli"]
        shell = shlex.join(["torchrun", *launcher, "-m", "agentgym_rl.cli", *args])
        argv += args
    else:
        argv, shell = cli_argv(*args), shlex.join(["agentgym-rl", *args])
    listen = [int(learn_config.receive.bind.rsplit(":", 1)[1])]
    if learn_config.weights is not None:
        listen.append(int(learn_config.weights.endpoint.rsplit(":", 1)[1]))
    hosts = place.learner_hosts if nodes > 1 else ()
    host = place.learner_host
    return ChildSpec(
        "learn", "learn", argv, shell, None, tuple(listen), host, place.reach(host), hosts
    )


def assemble(
    train: TrainConfig,
    learn_config: LearnConfig,
    rollouts: list[RolloutConfig],
    envs: list[ChildSpec],
    resume: bool,
    place: Placement,
    rdzv: int | None,
) -> RunPlan:
    cfg_dir = train.run_dir / "configs"
    learn_args = ["learn", "--config", str(cfg_dir / "learn.yaml")]
    learn_args += ["--resume"] if resume else []
    learner = _learner_child(train, learn_config, learn_args, place, rdzv)
    children = []
    for i in range(len(rollouts)):
        args = ["serve-rollouts", "--config", str(cfg_dir / f"rollout-{i}.yaml")]
        args += ["--sync"] if train.mode == "sync" else []
        device = place.rollout_device(i)
        env = {"CUDA_VISIBLE_DEVICES": device} if device is not None else {}
        children.append(
            cli_spec(f"rollout-{i}", "rollout", *args, host=place.rollout_host(i), env=env)
        )
    init = None
    if train.init_model is not None and not train.model.exists():
        args = ["init-model", "--out", str(train.model), *to_flags(train.init_model)]
        init = cli_spec("init-model", "init", *args)
    configs = {
        "learn.yaml": learn_config.model_dump(mode="json"),
        **{f"rollout-{i}.yaml": r.model_dump(mode="json") for i, r in enumerate(rollouts)},
    }
    return RunPlan(
        train=train,
        init=init,
        envs=envs,
        learn=learner,
        rollouts=children,
        learn_config=learn_config,
        rollout_configs=rollouts,
        has_eval=rollouts[0].eval is not None,
        configs=configs,
    )


def write_plan(plan: RunPlan) -> Path:
    """Write run_dir/configs/: the effective train config (what `--resume` reads), every
    composed per-process config and commands.sh, the commands in start order (re-launch any
    part by hand; on split clusters, the same commands with the addresses changed)."""
    import yaml  # type: ignore[import-untyped]

    cfg_dir = plan.run_dir / "configs"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    plan.train.write_run_copy(cfg_dir / "train.yaml")
    for name, data in plan.configs.items():
        (cfg_dir / name).write_text(yaml.safe_dump(data, sort_keys=False))
    lines = [
        "#!/bin/sh",
        "# The processes of this run in start order (agentgym-rl train runs them).",
    ]
    children = [*([plan.init] if plan.init else []), *plan.envs, plan.learn, *plan.rollouts]
    lines += [c.shell + (" &" if c.role != "init" else "") for c in children]
    (cfg_dir / "commands.sh").write_text("\n".join(lines) + "\n")
    return cfg_dir
