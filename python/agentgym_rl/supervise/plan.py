"""From a `TrainConfig` to the processes of one run: composed configs, commands, ports.

Contract: `plan_run(train, resume=...)` composes the per-process configs (the wiring below is
written over what the config says), validates them as `RolloutConfig` / `LearnConfig`, checks
the model directory, every pinned port and every env's dependencies, and returns a `RunPlan`;
it starts nothing. All problems are collected and raised together as one `PlanError` whose lines
start with the key path of the train config (`rollout.engine.temperature: ...`).

Wiring filled in: rollout-<i> gets `model`, `envs[].addresses` (an env served here but missing
from `rollout.envs` gets a default entry), `learner.endpoints`, `learner.sender_id`
(`rollout-<i>`), `weights_endpoint`, `log_dir` (`run_dir/rollout-<i>`), `engine.seed + i` and
`dataset.shuffle_seed + i` (two servers never walk the tasks in the same order) and, with
`eval` set, `eval.final_version = learn.max_steps` when unset; the learner gets
`model`, `receive.bind`, `weights.endpoint`, `log_dir` (`run_dir/learn`) and `checkpoint.dir`
(`run_dir/checkpoints`). Temperature, groups per step and max staleness are copied from the side
that sets them to the side that does not, and must agree when both do. With `mode: sync`, the
rollout server runs `--sync` on the env servers' HTTP addresses and max staleness is 0 on both
sides (one rollout server only).
"""

from __future__ import annotations

import copy
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from agentgym_rl.config.learn import LearnConfig
from agentgym_rl.config.rollout import RolloutConfig
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
            f"{'.'.join([prefix, *(str(p) for p in item['loc'])])}: {item['msg']}"
            for item in e.errors()
        ]
    return []


def _agree(rollout: dict[str, Any], rkey: str, learn: dict[str, Any], lkey: str) -> str | None:
    """Copy `rollout[rkey...]` <-> `learn[lkey]` to the side that lacks it; a problem when both
    are set and differ."""
    *rpath, rlast = rkey.split(".")
    node = rollout
    for part in rpath:
        child = node.get(part)
        node = node.setdefault(part, {}) if child is None else child
        if not isinstance(node, dict):
            return None  # the type error is reported by validation
    have_r, have_l = rlast in node, lkey in learn
    if have_r and have_l and node[rlast] != learn[lkey]:
        return (
            f"learn.{lkey}: {learn[lkey]!r} differs from rollout.{rkey} {node[rlast]!r}; "
            "they must be equal (set one of them only and train copies it)"
        )
    if have_r and not have_l:
        learn[lkey] = node[rlast]
    elif have_l and not have_r:
        node[rlast] = learn[lkey]
    return None


def _endpoint(
    section: dict[str, Any], key: str, where: str, ports: PortBook
) -> tuple[str, str] | None:
    """(bind, connect) endpoints of `section[key]`: pinned when the config gives a tcp port,
    otherwise a free port on 127.0.0.1. None when the value is not tcp (validation reports)."""
    value = section.get(key)
    fix = f"set {where}=tcp://127.0.0.1:0 to choose a free port"
    if value is None:
        port = ports.free()
        return f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port}"
    m = _TCP.match(str(value)) if isinstance(value, str) else None
    if m is None:
        return None
    host, port = m.group(1), int(m.group(2))
    port = ports.free() if port == 0 else ports.pinned(port, where, fix, host)
    bind_host = host if host != "localhost" else "127.0.0.1"
    connect_host = "127.0.0.1" if host in ("*", "0.0.0.0") else bind_host
    return f"tcp://{bind_host}:{port}", f"tcp://{connect_host}:{port}"


def _env_children(train: TrainConfig, ports: PortBook) -> tuple[list[ChildSpec], dict[str, list]]:
    children: list[ChildSpec] = []
    addresses: dict[str, list[str]] = {}
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
            addresses.setdefault(spec.env, []).append(address)
            name = f"env-{spec.env}-{r}"
            shell = " ".join(["agentgym-rl", *args])
            children.append(ChildSpec(name, "env", _cli(*args), shell, health_port=http))
    return children, addresses


def _learn_section(
    train: TrainConfig, ports: PortBook, problems: list[str]
) -> tuple[dict[str, Any], str | None, str | None]:
    """The composed learn mapping, the receive connect endpoint and the weights endpoint."""
    learn = copy.deepcopy(train.learn)
    learn["model"] = str(train.model)
    learn["log_dir"] = str(train.run_dir / "learn")
    ckpt = learn.get("checkpoint")
    learn["checkpoint"] = {
        **(ckpt if isinstance(ckpt, dict) else {}),
        "dir": str(train.run_dir / "checkpoints"),
    }
    receive = learn.get("receive")
    receive = learn["receive"] = dict(receive) if isinstance(receive, dict) else {}
    groups_to: str | None = None
    got = _endpoint(receive, "bind", "learn.receive.bind", ports)
    if got is not None:
        receive["bind"], groups_to = got
    weights_at: str | None = None
    if "weights" not in learn or isinstance(learn["weights"], dict):
        weights = learn["weights"] = dict(learn.get("weights") or {})
        got = _endpoint(weights, "endpoint", "learn.weights.endpoint", ports)
        if got is not None:
            weights["endpoint"], weights_at = got
    parallel = learn.get("parallel")
    if isinstance(parallel, dict) or parallel is None:
        parallel = learn["parallel"] = dict(parallel or {})
        tp, pp = int(parallel.get("tp", 1)), int(parallel.get("pp", 1))
        n = train.learner_procs
        if "dp" not in parallel and n % (tp * pp) == 0:
            parallel["dp"] = n // (tp * pp)
        dp = int(parallel.get("dp", 1))
        if tp * pp * dp != n:
            problems.append(
                f"learner_procs: {n} ranks, but learn.parallel has tp={tp} pp={pp} dp={dp} "
                f"(tp*pp*dp={tp * pp * dp}); set learner_procs={tp * pp * dp} or change "
                "learn.parallel so that tp*pp*dp equals it"
            )
    return learn, groups_to, weights_at


def _rollout_section(
    train: TrainConfig,
    index: int,
    base: dict[str, Any],
    addresses: dict[str, list[str]],
    groups_to: str | None,
    weights_at: str | None,
    resume: bool,
    max_steps: int,
) -> dict[str, Any]:
    rollout = copy.deepcopy(base)
    rollout["model"] = str(train.model)
    envs = rollout.get("envs")
    envs = rollout["envs"] = [dict(e) if isinstance(e, dict) else e for e in (envs or [])]
    listed = {e.get("env"): e for e in envs if isinstance(e, dict)}
    for env, addrs in addresses.items():
        if env in listed:
            listed[env]["addresses"] = addrs
        else:
            envs.append({"env": env, "addresses": addrs})
    if "dataset" not in rollout:
        first = train.env_servers[0].env
        # a file the env package ships, spelled as shipped configs spell it (`shipped_path`)
        split = f"envs/agentgym_envs/{first}/data/train.json"
        rollout["dataset"] = {"env": first, "split": split}
    learner = rollout.get("learner")
    learner = rollout["learner"] = dict(learner) if isinstance(learner, dict) else {}
    if groups_to is not None:
        learner["endpoints"] = [groups_to]
    learner["sender_id"] = f"rollout-{index}"
    rollout["weights_endpoint"] = weights_at
    rollout["log_dir"] = str(train.run_dir / f"rollout-{index}")
    for section, key in (("engine", "seed"), ("dataset", "shuffle_seed")):
        node = rollout.get(section)
        if isinstance(node, dict) or node is None:
            node = rollout[section] = dict(node or {})
            seed = node.get(key, 0)
            if isinstance(seed, int):
                node[key] = seed + index
    if resume and isinstance(rollout.get("dataset"), dict):
        rollout["dataset"]["resume"] = True
    evaluation = rollout.get("eval")
    if isinstance(evaluation, dict) and evaluation.get("final_version") is None:
        # the final held-out eval runs on the learner's last weights, then the server exits
        rollout["eval"] = {**evaluation, "final_version": max_steps}
    return rollout


def _on_policy(train: TrainConfig, rollout: dict[str, Any], learn: dict[str, Any]) -> list[str]:
    """`mode: sync`: staleness 0 on both sides (written over the config's); one rollout server."""
    buffer = rollout.get("buffer")
    if isinstance(buffer, dict) or buffer is None:
        rollout["buffer"] = {**(buffer or {}), "max_staleness": 0}
    learn["max_staleness"] = 0
    if train.rollout_servers != 1:
        return [
            f"rollout_servers: {train.rollout_servers}, but mode sync runs the reference's "
            "single driver: set rollout_servers=1 (or mode=async)"
        ]
    return []


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
    envs, addresses = _env_children(train, ports)
    learn, groups_to, weights_at = _learn_section(train, ports, problems)
    base = copy.deepcopy(train.rollout)
    if train.mode == "sync":
        problems += _on_policy(train, base, learn)
    for rkey, lkey in (
        ("engine.temperature", "temperature"),
        ("buffer.groups_per_step", "groups_per_step"),
        ("buffer.max_staleness", "max_staleness"),
    ):
        problem = _agree(base, rkey, learn, lkey)
        if problem:
            problems.append(problem)
    max_steps = learn.get("max_steps", LearnConfig.model_fields["max_steps"].default)
    rollouts = [
        _rollout_section(train, i, base, addresses, groups_to, weights_at, resume, max_steps)
        for i in range(train.rollout_servers)
    ]
    problems += _validate(LearnConfig, learn, "learn")
    for data in rollouts:  # the servers differ only in wiring: report each problem once
        problems += [p for p in _validate(RolloutConfig, data, "rollout") if p not in problems]
    problems += ports.errors
    if problems:
        raise PlanError(problems)
    return _assemble(train, learn, rollouts, envs, resume)


def _assemble(
    train: TrainConfig,
    learn: dict[str, Any],
    rollouts: list[dict[str, Any]],
    envs: list[ChildSpec],
    resume: bool,
) -> RunPlan:
    cfg_dir = train.run_dir / "configs"
    learn_config = LearnConfig.model_validate(learn)
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
        shell = " ".join(
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
        argv, shell = _cli(*learn_args), " ".join(["agentgym-rl", *learn_args])
    listen = [int(learn_config.receive.bind.rsplit(":", 1)[1])]
    if learn_config.weights is not None:
        listen.append(int(learn_config.weights.endpoint.rsplit(":", 1)[1]))
    learner = ChildSpec("learn", "learn", argv, shell, listen_ports=tuple(listen))
    children = []
    for i in range(len(rollouts)):
        args = ["serve-rollouts", "--config", str(cfg_dir / f"rollout-{i}.yaml")]
        args += ["--sync"] if train.mode == "sync" else []
        children.append(
            ChildSpec(f"rollout-{i}", "rollout", _cli(*args), " ".join(["agentgym-rl", *args]))
        )
    init = None
    if train.init_model is not None and not train.model.exists():
        args = ["init-model", "--out", str(train.model)]
        for key, value in train.init_model.items():
            flag = f"--{key.replace('_', '-')}"
            if isinstance(value, bool):  # a switch: --flag or --no-flag
                args += [flag if value else f"--no-{key.replace('_', '-')}"]
            elif isinstance(value, list):  # a repeatable flag (--env-option)
                args += [a for v in value for a in (flag, str(v))]
            else:
                args += [flag, str(value)]
        init = ChildSpec("init-model", "init", _cli(*args), " ".join(["agentgym-rl", *args]))
    configs = {"learn.yaml": learn, **{f"rollout-{i}.yaml": r for i, r in enumerate(rollouts)}}
    return RunPlan(
        train=train,
        init=init,
        envs=envs,
        learn=learner,
        rollouts=children,
        learn_config=learn_config,
        rollout_configs=[RolloutConfig.model_validate(r) for r in rollouts],
        has_eval=rollouts[0].get("eval") is not None,
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
