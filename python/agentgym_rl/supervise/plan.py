"""From a `TrainConfig` to the processes of one run: composed configs, commands, ports.

Contract: `plan_run(train, resume=...)` composes the per-process configs (the wiring below is
written over what the config says), validates them as `RolloutConfig` / `LearnConfig`, checks
the model directory, every pinned port and every env's dependencies, and returns a `RunPlan`;
it starts nothing. All problems are collected and raised together as one `PlanError` whose lines
start with the key path of the train config (`rollout.engine.temperature: ...`).

Wiring filled in (the fields marked `Wired` in the per-process configs): rollout-<i> gets
`model`, `envs[].addresses` (an env served here but missing from `rollout.envs` gets a default
entry), `learner.endpoints`, `learner.sender_id` (`rollout-<i>`), `weights_endpoint`, `log_dir`
(`run_dir/rollout-<i>`), and the shared `buffer.groups_per_step` / `buffer.max_staleness`; the
learner gets `model`, `receive.bind` and `weights.endpoint` (free ports unless the config pins
them), `log_dir` (`run_dir/learn`), `checkpoint.dir` (`run_dir/checkpoints`), the shared
`groups_per_step` / `max_staleness`, `temperature` (the engine's) and `parallel.dp` (from
`learner_procs`, unless given). Besides: `engine.seed + i` and `dataset.shuffle_seed + i` (two
servers never walk the tasks in the same order), with `eval` set `eval.final_version =
learn.max_steps` when unset, and the first env's shipped train split when `dataset` is left out.
With `mode: sync`, the rollout server runs `--sync` on the env servers' HTTP addresses and max
staleness is 0 on both sides (one rollout server only).
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from agentgym_rl.config.flags import to_flags
from agentgym_rl.config.learn import LearnConfig
from agentgym_rl.config.rollout import DatasetConfig, DatasetSource, RolloutConfig
from agentgym_rl.config.startup import missing_model
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.supervise.ports import PortBook
from agentgym_rl.supervise.preflight import env_problems

Role = Literal["init", "env", "learn", "rollout"]
_TCP = re.compile(r"^tcp://([^\s:/]+):(\d{1,5})$")


class PlanError(ValueError):
    """The run cannot start; the message lists every problem, one per line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("cannot start the run:\n" + "\n".join(f"  {p}" for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class ChildSpec:
    """How to start one child process and when it is ready."""

    name: str
    role: Role
    argv: list[str]
    shell: str
    """The same command as a user types it (the split-cluster recipe in configs/commands.sh)."""
    health_port: int | None = None
    """HTTP port whose /health answers once the child is ready."""
    listen_ports: tuple[int, ...] = ()
    """TCP ports the child binds once ready."""


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


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentgym_rl.cli", *args]


def _validate(model: type[BaseModel], data: dict[str, Any], prefix: str) -> list[str]:
    try:
        model.model_validate(data)
    except ValidationError as e:
        return [
            f"{'.'.join([prefix, *(str(p) for p in item['loc'])])}: "
            + item["msg"].removeprefix("Value error, ")
            for item in e.errors()
        ]
    return []


def _endpoint(value: str | None, where: str, ports: PortBook) -> tuple[str, str] | None:
    """(bind, connect) endpoints for `value`: pinned when the config gives a tcp port,
    otherwise (None, or port 0) a free port. None when the value is not tcp (then it is
    reported)."""
    if value is None:
        port = ports.free()
        return f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port}"
    m = _TCP.match(value)
    if m is None:
        return None
    host, port = m.group(1), int(m.group(2))
    fix = f"set {where}=tcp://127.0.0.1:0 to choose a free port"
    port = ports.free() if port == 0 else ports.pinned(port, where, fix, host)
    bind_host = host if host != "localhost" else "127.0.0.1"
    connect_host = "127.0.0.1" if host in ("*", "0.0.0.0") else bind_host
    return f"tcp://{bind_host}:{port}", f"tcp://{connect_host}:{port}"


def _env_children(
    train: TrainConfig, ports: PortBook
) -> tuple[list[ChildSpec], dict[str, list[str]], dict[str, list[str]]]:
    """The env servers, the addresses the rollout pool uses, and each server's HTTP address
    (every env server serves HTTP: the sync regime's clients and a user's agent use it)."""
    children: list[ChildSpec] = []
    addresses: dict[str, list[str]] = {}
    http_urls: dict[str, list[str]] = {}
    for i, spec in enumerate(train.env_servers):
        for r in range(spec.replicas):
            fix = f"change env_servers.{i}.{{key}} or leave it empty to choose free ports"
            if spec.http_ports:
                where = f"env_servers.{i}.http_ports.{r}"
                http = ports.pinned(spec.http_ports[r], where, fix.format(key="http_ports"))
            else:
                http = ports.free()
            args = ["env", "serve", spec.env, "--port", str(http)]
            if spec.transport == "zmq":  # the sync regime still steps over HTTP
                where = f"env_servers.{i}.zmq_ports.{r}"
                fixed = spec.zmq_ports[r] if spec.zmq_ports else None
                zmq = (
                    ports.pinned(fixed, where, fix.format(key="zmq_ports"))
                    if fixed
                    else ports.free()
                )
                args += ["--zmq-port", str(zmq)]
            sync_client = train.mode == "sync"  # AgentGym's HTTP clients, as the reference
            if spec.transport == "zmq" and not sync_client:
                address = f"tcp://127.0.0.1:{zmq}"
            else:
                address = f"http://127.0.0.1:{http}"
            args += spec.args
            addresses.setdefault(spec.name, []).append(address)
            http_urls.setdefault(spec.name, []).append(f"http://127.0.0.1:{http}")
            name = f"env-{spec.name}-{r}"
            shell = shlex.join(["agentgym-rl", *args])
            children.append(ChildSpec(name, "env", _cli(*args), shell, health_port=http))
    return children, addresses, http_urls


def _set(model: BaseModel, name: str) -> bool:
    """Whether the train config wrote `name` in `model` (rather than leaving the default)."""
    return name in model.model_fields_set


def _learn_data(
    train: TrainConfig, ports: PortBook, problems: list[str]
) -> tuple[dict[str, Any], str | None, str | None]:
    """The learner's config mapping, the receive connect endpoint and the weights endpoint."""
    section = train.learn
    learn = section.model_dump()
    learn.update(
        model=train.model,
        log_dir=train.run_dir / "learn",
        groups_per_step=train.groups_per_step,
        max_staleness=0 if train.mode == "sync" else train.max_staleness,
        temperature=train.rollout.engine.temperature,
    )
    learn["checkpoint"]["dir"] = train.run_dir / "checkpoints"
    groups_to = weights_at = None
    bind = section.receive.bind if _set(section.receive, "bind") else None
    got = _endpoint(bind, "learn.receive.bind", ports)
    if got is not None:
        learn["receive"]["bind"], groups_to = got
    if section.weights is not None:
        pinned = section.weights.endpoint if _set(section.weights, "endpoint") else None
        got = _endpoint(pinned, "learn.weights.endpoint", ports)
        if got is not None:
            learn["weights"]["endpoint"], weights_at = got
    parallel, n = section.parallel, train.learner_procs
    dp = parallel.dp if _set(parallel, "dp") else max(1, n // (parallel.tp * parallel.pp))
    learn["parallel"]["dp"] = dp
    if parallel.tp * parallel.pp * dp != n:
        problems.append(
            f"learner_procs: {n} ranks, but learn.parallel has tp={parallel.tp} "
            f"pp={parallel.pp} dp={dp} (tp*pp*dp={parallel.tp * parallel.pp * dp}); set "
            f"learner_procs={parallel.tp * parallel.pp * dp} or change learn.parallel so that "
            "tp*pp*dp equals it"
        )
    return learn, groups_to, weights_at


def _rollout_data(
    train: TrainConfig,
    index: int,
    addresses: dict[str, list[str]],
    groups_to: str | None,
    weights_at: str | None,
    resume: bool,
    http_urls: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Rollout server `index`'s config mapping."""
    section = train.rollout
    rollout = section.model_dump()
    listed = {e["env"]: e for e in rollout["envs"]}
    rollout["envs"] = [
        {**listed.get(env, {"env": env}), "addresses": addrs} for env, addrs in addresses.items()
    ]
    # the first env's split declared as `train`
    default = DatasetConfig(mix=[DatasetSource(env=train.env_servers[0].name, split=Path("train"))])
    dataset = rollout["dataset"] = (section.dataset or default).model_dump()
    dataset["shuffle_seed"] += index
    dataset["resume"] = dataset["resume"] or resume
    rollout["engine"]["seed"] += index
    rollout["buffer"].update(
        groups_per_step=train.groups_per_step,
        max_staleness=0 if train.mode == "sync" else train.max_staleness,
    )
    rollout["learner"].update(
        endpoints=[groups_to] if groups_to else [], sender_id=f"rollout-{index}"
    )
    rollout.update(
        model=str(train.model),
        weights_endpoint=weights_at,
        log_dir=train.run_dir / f"rollout-{index}",
    )
    if train.agent is not None:
        rollout["agent"] = train.agent.model_dump()
    if rollout["agent"] is not None:
        rollout["agent"]["env_urls"] = dict(http_urls or {})
    if rollout["eval"] is not None and rollout["eval"]["final_version"] is None:
        # the final held-out eval runs on the learner's last weights, then the server exits
        rollout["eval"]["final_version"] = train.learn.max_steps
    return rollout


def _unserved(train: TrainConfig) -> list[str]:
    """Problems of envs the rollout section describes that no env server serves."""
    served = {spec.name for spec in train.env_servers}
    problems = [
        f"rollout.envs.{i}.env: {entry.env!r} has no env_servers entry; serve it or drop it"
        for i, entry in enumerate(train.rollout.envs)
        if entry.env not in served
    ]
    agent = train.agent or train.rollout.agent
    if agent is not None:
        if train.mode == "sync":
            problems.append("agent: a user's agent runs in mode async only (set mode=async)")
        if agent.port and train.rollout_servers > 1:
            problems.append(
                f"agent.port: {agent.port} for {train.rollout_servers} rollout servers, each "
                "with its own endpoint: leave it 0 (free ports)"
            )
    if train.mode == "sync" and train.rollout_servers != 1:
        problems.append(
            f"rollout_servers: {train.rollout_servers}, but mode sync runs the reference's "
            "single driver: set rollout_servers=1 (or mode=async)"
        )
    return problems


def plan_run(train: TrainConfig, *, resume: bool = False) -> RunPlan:
    """Compose and check the run described by `train`; raises `PlanError` listing every
    problem. Nothing is started and nothing is written."""
    problems: list[str] = []
    ports = PortBook()
    if not resume and (train.run_dir / "run.jsonl").exists():
        # a second run in the same folder would append to the first one's logs and metrics
        problems.append(
            f"run_dir: {train.run_dir} already holds a run; continue it with "
            f"`agentgym-rl train --resume {train.run_dir}`, or set run_dir to a new folder "
            f"(or remove this one)"
        )
    if train.init_model is None or train.model.exists():
        problem = missing_model(train.model)
        if problem:
            problems.append(f"model: {problem} Or give `init_model:` options to create it.")
    problems += env_problems([s.env for s in train.env_servers])
    problems += _unserved(train)
    if train.logging.wandb is not None and importlib.util.find_spec("wandb") is None:
        problems.append(
            "logging.wandb: Weights & Biases is not installed: `pip install wandb`, or leave "
            "logging.wandb out"
        )
    envs, addresses, http_urls = _env_children(train, ports)
    learn, groups_to, weights_at = _learn_data(train, ports, problems)
    rollouts = [
        _rollout_data(train, i, addresses, groups_to, weights_at, resume, http_urls)
        for i in range(train.rollout_servers)
    ]
    problems += _validate(LearnConfig, learn, "learn")
    for data in rollouts:  # the servers differ only in wiring: report each problem once
        problems += [p for p in _validate(RolloutConfig, data, "rollout") if p not in problems]
    problems += ports.errors
    if problems:
        raise PlanError(problems)
    return _assemble(
        train,
        LearnConfig.model_validate(learn),
        [RolloutConfig.model_validate(r) for r in rollouts],
        envs,
        resume,
    )


def _assemble(
    train: TrainConfig,
    learn_config: LearnConfig,
    rollouts: list[RolloutConfig],
    envs: list[ChildSpec],
    resume: bool,
) -> RunPlan:
    cfg_dir = train.run_dir / "configs"
    learn_args = [
        "learn",
        "--config",
        str(cfg_dir / "learn.yaml"),
        *(["--resume"] if resume else []),
    ]
    n = train.learner_procs
    if n > 1:
        launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}"]
        argv = [sys.executable, *launcher, "-m", "agentgym_rl.cli", *learn_args]
        shell = shlex.join(
            [
                "torchrun",
                "--standalone",
                f"--nproc_per_node={n}",
                "-m",
                "agentgym_rl.cli",
                *learn_args,
            ]
        )
    else:
        argv, shell = _cli(*learn_args), shlex.join(["agentgym-rl", *learn_args])
    listen = [int(learn_config.receive.bind.rsplit(":", 1)[1])]
    if learn_config.weights is not None:
        listen.append(int(learn_config.weights.endpoint.rsplit(":", 1)[1]))
    learner = ChildSpec("learn", "learn", argv, shell, listen_ports=tuple(listen))
    children = []
    for i in range(len(rollouts)):
        args = ["serve-rollouts", "--config", str(cfg_dir / f"rollout-{i}.yaml")]
        args += ["--sync"] if train.mode == "sync" else []
        children.append(
            ChildSpec(f"rollout-{i}", "rollout", _cli(*args), shlex.join(["agentgym-rl", *args]))
        )
    init = None
    if train.init_model is not None and not train.model.exists():
        args = ["init-model", "--out", str(train.model), *to_flags(train.init_model)]
        init = ChildSpec("init-model", "init", _cli(*args), shlex.join(["agentgym-rl", *args]))
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
    train = plan.train.model_dump(mode="json")
    (cfg_dir / "train.yaml").write_text(yaml.safe_dump(train, sort_keys=False))
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
