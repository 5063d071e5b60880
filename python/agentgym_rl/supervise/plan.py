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
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from agentgym_rl.config.init_model import CREATED_CONTEXT
from agentgym_rl.config.learn import LearnConfig
from agentgym_rl.config.rollout import DatasetConfig, DatasetSource, RolloutConfig
from agentgym_rl.config.startup import missing_model
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.processes.child import ChildSpec, cli_argv
from agentgym_rl.processes.ports import JobPorts, PortBook
from agentgym_rl.supervise.children import RunPlan, assemble
from agentgym_rl.supervise.placement import LOCAL, Placement
from agentgym_rl.supervise.preflight import bf16_problems, env_problems

_TCP = re.compile(r"^tcp://([^\s:/]+):(\d{1,5})$")


class PlanError(ValueError):
    """The run cannot start; the message lists every problem, one per line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("cannot start the run:\n" + "\n".join(f"  {p}" for p in problems))
        self.problems = problems


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


Ports = PortBook | JobPorts


def _endpoint(
    value: str | None, where: str, ports: Ports, place: Placement
) -> tuple[str, str] | None:
    """(bind, connect) endpoints for `value`: pinned when the config gives a tcp port,
    otherwise (None, or port 0) a free port. None when the value is not tcp (then it is
    reported). Placed on a cluster, the learner binds every interface and is reached at its
    rank-0 host, whatever host the value names."""
    if value is None:
        port = ports.free()
        return f"tcp://{place.bind_host}:{port}", f"tcp://{place.reach(place.learner_host)}:{port}"
    m = _TCP.match(value)
    if m is None:
        return None
    host, port = m.group(1), int(m.group(2))
    fix = f"set {where}=tcp://127.0.0.1:0 to choose a free port"
    port = ports.free() if port == 0 else ports.pinned(port, where, fix, host)
    if place.bind_all:
        return f"tcp://0.0.0.0:{port}", f"tcp://{place.reach(place.learner_host)}:{port}"
    bind_host = host if host != "localhost" else "127.0.0.1"
    connect_host = "127.0.0.1" if host in ("*", "0.0.0.0") else bind_host
    return f"tcp://{bind_host}:{port}", f"tcp://{connect_host}:{port}"


def _env_children(
    train: TrainConfig, ports: Ports, place: Placement
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
            host = place.env_host(len(children))
            reach = place.reach(host)
            args = ["env", "serve", spec.env, "--port", str(http)]
            args += ["--host", place.bind_host] if place.bind_all else []
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
                address = f"tcp://{reach}:{zmq}"
            else:
                address = f"http://{reach}:{http}"
            args += spec.args
            addresses.setdefault(spec.name, []).append(address)
            http_urls.setdefault(spec.name, []).append(f"http://{reach}:{http}")
            name = f"env-{spec.name}-{r}"
            shell = shlex.join(["agentgym-rl", *args])
            child = ChildSpec(name, "env", cli_argv(*args), shell, http, host=host, address=reach)
            children.append(child)
    return children, addresses, http_urls


def _set(model: BaseModel, name: str) -> bool:
    """Whether the train config wrote `name` in `model` (rather than leaving the default)."""
    return name in model.model_fields_set


def _learn_data(
    train: TrainConfig, ports: Ports, place: Placement, problems: list[str]
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
    got = _endpoint(bind, "learn.receive.bind", ports, place)
    if got is not None:
        learn["receive"]["bind"], groups_to = got
    if section.weights is not None:
        pinned = section.weights.endpoint if _set(section.weights, "endpoint") else None
        got = _endpoint(pinned, "learn.weights.endpoint", ports, place)
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
    options = {spec.name: spec.env_options for spec in train.env_servers}
    rollout["envs"] = [
        {**listed.get(env, {"env": env}), "addresses": addrs, "env_options": options.get(env, {})}
        for env, addrs in addresses.items()
    ]
    # the first env's split declared as `train`
    default = DatasetConfig(mix=[DatasetSource(env=train.env_servers[0].name, split=Path("train"))])
    dataset = rollout["dataset"] = (section.dataset or default).model_dump()
    dataset["shuffle_seed"] += index
    dataset["resume"] = dataset["resume"] or resume
    rollout["engine"]["seed"] += index
    if train.learn.lora is not None:  # the engine serves the adapters the learner sends
        rollout["engine"]["max_lora_rank"] = train.learn.lora.rank
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


def _bf16_asked(train: TrainConfig) -> dict[str, str]:
    """The run's settings that ask for bfloat16, each with its float32 value."""
    asked = {}
    if train.init_model is not None and train.init_model.warmup_precision == "bf16":
        asked["init_model.warmup_precision"] = "fp32"
    if train.learn.precision == "bf16":
        asked["learn.precision"] = "fp32"
    if train.rollout.engine.dtype == "bfloat16":
        asked["rollout.engine.dtype"] = "float32"
    return asked


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


def plan_run(
    train: TrainConfig,
    *,
    resume: bool = False,
    placement: Placement = LOCAL,
    ports: Ports | None = None,
) -> RunPlan:
    """Compose and check the run described by `train`; raises `PlanError` listing every
    problem. Nothing is started and nothing is written. On one machine by default; a cluster
    launcher passes the placement its scheduler gave and its job's ports."""
    problems: list[str] = []
    ports = ports if ports is not None else PortBook()
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
    elif train.init_model.base is None and (
        (wanted := train.rollout.engine.max_model_len or 0) > CREATED_CONTEXT
    ):
        # found now, not after the minutes init-model takes (the engine would refuse it then)
        problems.append(
            f"rollout.engine.max_model_len: {wanted} is larger than the context of the model "
            f"init-model creates ({CREATED_CONTEXT} tokens); give it <= {CREATED_CONTEXT}"
        )
    problems += env_problems([s.env for s in train.env_servers])
    if placement == LOCAL:  # a cluster's nodes are not this machine
        problems += bf16_problems(_bf16_asked(train))
    problems += _unserved(train)
    if train.logging.wandb is not None and importlib.util.find_spec("wandb") is None:
        problems.append(
            "logging.wandb: Weights & Biases is not installed: `pip install wandb`, or leave "
            "logging.wandb out"
        )
    envs, addresses, http_urls = _env_children(train, ports, placement)
    learn, groups_to, weights_at = _learn_data(train, ports, placement, problems)
    rdzv = ports.free() if len(placement.learner_hosts) > 1 else None
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
    return assemble(
        train,
        LearnConfig.model_validate(learn),
        [RolloutConfig.model_validate(r) for r in rollouts],
        envs,
        resume,
        placement,
        rdzv,
    )
