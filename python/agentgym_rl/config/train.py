"""Typed configuration of `agentgym-rl train` (torch-free: pydantic only).

Contract: a `TrainConfig` describes one run on one machine: where it lives (`run_dir`), the
policy (`model`, optionally created first by `init-model`), the env servers, how many rollout
servers and learner ranks to start, the values both sides of the stream share (groups per
step, max staleness: stated once, here), and the typed `rollout` / `learn` / `init_model`
sections: `RolloutConfig`, `LearnConfig` and `InitModelConfig` without their fields marked
`Wired`, which `train` fills in (model, addresses, endpoints, log and checkpoint dirs, the shared
values; see `agentgym_rl.supervise.plan`). A train config that validates has no unknown key
anywhere; one that sets a wired field is told where that value comes from. Ports left out are
chosen free; a port written in the config is pinned and must be free.
"""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, Field, model_validator

from agentgym_rl.config.base import ConfigModel, wired_fields
from agentgym_rl.config.cluster import ClusterConfig
from agentgym_rl.config.init_model import InitModelConfig, InitModelSettings
from agentgym_rl.config.learn import LearnConfig, LearnSection
from agentgym_rl.config.rollout import (
    GROUPS_PER_STEP,
    MAX_STALENESS,
    ActionFormat,
    AgentConfig,
    RolloutConfig,
    RolloutSection,
)
from agentgym_rl.env_discovery import env_name, env_traits


class EnvServerSpec(ConfigModel):
    """The servers of one environment: `replicas` processes of `agentgym-rl env serve <env>`."""

    env: str = Field(min_length=1)
    """Environment name as `agentgym-rl env list` shows it (e.g. `babyai`), or a reference
    `package.module:Class` to an env class of your own (served under the class's `name`)."""
    replicas: int = Field(default=1, ge=1, le=64)
    """Server processes of this env (episodes are balanced over them)."""
    transport: Literal["zmq", "http"] = "zmq"
    """How rollout servers reach them: native ZeroMQ (`tcp://`) or AgentGym HTTP (`http://`)."""
    args: list[str] = Field(default_factory=list)
    """Extra arguments of `env serve`, e.g. ["--idle-timeout", "120"]."""
    http_ports: list[int] = Field(default_factory=list)
    """Pinned HTTP ports, one per replica (empty: chosen free)."""
    zmq_ports: list[int] = Field(default_factory=list)
    """Pinned ZeroMQ ports, one per replica, transport zmq only (empty: chosen free)."""

    @property
    def env_option_args(self) -> list[str]:
        """The KEY=VALUE values of `args`' `--env-option`s (and `--env-option=KEY=VALUE`s)."""
        pairs = [v for k, v in zip(self.args, self.args[1:], strict=False) if k == "--env-option"]
        return pairs + [
            a.removeprefix("--env-option=") for a in self.args if a.startswith("--env-option=")
        ]

    @property
    def env_options(self) -> dict[str, str]:
        """`env_option_args` as a mapping."""
        return {k: v for k, _, v in (pair.partition("=") for pair in self.env_option_args)}

    @property
    def name(self) -> str:
        """The env's name (its task ids' prefix): `env` itself, or a reference's class `name`."""
        try:
            return env_name(self.env)
        except (LookupError, ImportError):  # preflight reports it; the reference names it meanwhile
            return self.env

    @model_validator(mode="after")
    def ports_match_replicas(self) -> EnvServerSpec:
        for name in ("http_ports", "zmq_ports"):
            ports: list[int] = getattr(self, name)
            if ports and len(ports) != self.replicas:
                raise ValueError(
                    f"{name} lists {len(ports)} ports for {self.replicas} replicas: give one per "
                    f"replica or leave it empty to choose free ports"
                )
            if any(not 0 < p < 65536 for p in ports):
                raise ValueError(f"{name} must be TCP ports in 1..65535, got {ports}")
        if self.zmq_ports and self.transport != "zmq":
            raise ValueError("zmq_ports is set but transport is http")
        return self


class RestartConfig(ConfigModel):
    """Restarting crashed children (env servers and rollout servers only)."""

    max_restarts: int = Field(default=0, ge=0)
    """Restarts allowed per child; past them a crash stops the run. The learner is never
    restarted (a learner crash ends the run; `train --resume` continues it)."""


class WandbConfig(ConfigModel):
    """A Weights & Biases run of the train run (needs `pip install wandb`)."""

    project: str = Field(min_length=1)
    """W&B project."""
    mode: Literal["offline", "online"] = "offline"
    """offline: files in run_dir/wandb/ only (`wandb sync` uploads them later); online: also
    sent as the run goes (needs `wandb login` or WANDB_API_KEY)."""
    entity: str | None = None
    """W&B team or user (default: the logged-in user's)."""
    name: str | None = None
    """Run name (default: the run folder's name)."""


class LoggingConfig(ConfigModel):
    """Where a run's metrics go besides its JSONL records, named as verl and TRL name them
    (`train/success`, `actor/kl`, `eval/<env>/success`, ...; `metric_sinks/scalars.py`)."""

    tensorboard: bool = True
    """TensorBoard scalars in run_dir/tensorboard/ (`tensorboard --logdir RUN_DIR`)."""
    wandb: WandbConfig | None = None
    """Weights & Biases (None: off)."""


FREE_PORT = "tcp://127.0.0.1:0"
"""An endpoint whose port `train` chooses free when it plans the run."""


class TrainConfig(ConfigModel):
    """Everything `agentgym-rl train` needs for one supervised run on one machine."""

    run_dir: Path = Path("runs/train")
    """Everything of the run lives here: configs/, logs/, rollout-<i>/, learn/, checkpoints/,
    plots/, summary.md."""
    model: Path
    """Local HF checkpoint directory both the rollout engines and the learner start from."""
    init_model: InitModelSettings | None = None
    """When `model` does not exist: how `agentgym-rl init-model --out <model>` creates it (its
    flags, as keys)."""
    env_servers: list[EnvServerSpec] = Field(min_length=1)
    """One entry per environment."""
    rollout_servers: int = Field(default=1, ge=1, le=64)
    """`serve-rollouts` processes (each owns one vLLM engine)."""
    mode: Literal["async", "sync"] = "async"
    """`async`: rollout servers generate continuously, the learner trains on what arrives
    (within `max_staleness`). `sync`: the reference's regime on the same parts, as a baseline:
    the rollout server (`serve-rollouts --sync`, one only) rolls out a step's groups on the
    current weights with batched turns and AgentGym-style HTTP env clients (the env servers'
    HTTP ports, whatever their `transport`), the batch waiting for its slowest episode; the
    learner trains on them and publishes; only then does the next batch start. On-policy:
    `max_staleness` is 0 on both sides."""
    learner_procs: int = Field(default=1, ge=1, le=1024)
    """Learner ranks (torchrun nproc_per_node; must equal tp * pp * dp)."""
    groups_per_step: int = Field(default=GROUPS_PER_STEP, ge=1)
    """Groups per optimizer step (B): the rollout buffer releases and the learner consumes this
    many."""
    max_staleness: int = Field(default=MAX_STALENESS, ge=0)
    """Versions a group's oldest token may lag the learner (S), admitted by the rollout buffer
    and checked again by the learner. `mode: sync` runs with 0."""
    rollout: RolloutSection = RolloutSection()
    """The rollout servers' settings (see configs/rollout/); train fills in the wiring."""
    agent: AgentConfig | None = None
    """Your own agent plays the episodes, through each rollout server's OpenAI-compatible
    endpoint (docs/agents.md; the same as `rollout.agent`)."""
    learn: LearnSection = LearnSection()
    """The learner's settings (see configs/learn/); train fills in the wiring."""
    learner_threads: Annotated[int, Field(ge=1)] | Literal["all"] | None = None
    """CPU threads per learner rank (OMP_NUM_THREADS). None: half the machine's cores over the
    ranks, at least 1. The other half stays with the rollout engines: vLLM's CPU build pins its
    threads, and a learner with more threads than free cores stalls on every parallel region
    (measured: 2 threads next to an engine on 2 cores made a warm-up step 4-14x slower than 1,
    a 2M model's operations lasting microseconds). `all`: every core over the ranks, for a
    learner that is most of the step (a pretrained model on a CPU: the engine idles while it
    learns, and its operations last long enough that sharing a core with the engine costs
    little; SmolLM2-135M on 2 cores trained 31-33 tokens/s on 1 thread, 44-49 on 2). A learner
    whose threads reach into the engines' half waits passively at its barriers
    (`OMP_WAIT_POLICY=PASSIVE`, as the engine's); on cores of its own it spins, which is faster."""
    restart: RestartConfig = RestartConfig()
    """Restarting crashed env and rollout servers."""
    logging: LoggingConfig = LoggingConfig()
    """Metric sinks besides the JSONL records (TensorBoard, Weights & Biases)."""
    cluster: ClusterConfig | None = None
    """The nodes of each role when `agentgym-rl launch` takes this run to a cluster (SLURM or
    Ray; docs/split-clusters.md); `train` on one machine ignores it."""

    def write_run_copy(self, path: Path) -> None:
        """Write the run folder's copy (`configs/train.yaml`, what `train --resume` and a
        cluster job plan from): every field, but a learner endpoint the config left to its
        default as port 0, so that read back it still means a free port chosen at planning,
        not the standalone learner's fixed 5555/5557, which two runs on one node would both
        bind."""
        data = self.model_dump(mode="json")
        learn = data["learn"]
        if "bind" not in self.learn.receive.model_fields_set:
            learn["receive"]["bind"] = FREE_PORT
        if self.learn.weights is not None and "endpoint" not in self.learn.weights.model_fields_set:
            learn["weights"]["endpoint"] = FREE_PORT
        path.write_text(yaml.safe_dump(data, sort_keys=False))

    def threads_per_learner_rank(self) -> int:
        cores = os.cpu_count() or 2
        if self.learner_threads == "all":
            return max(1, cores // self.learner_procs)
        if self.learner_threads is not None:
            return self.learner_threads
        return max(1, cores // (2 * self.learner_procs))

    def learner_shares_cores(self) -> bool:
        """Whether the learner's threads reach into the half of the cores the engines keep."""
        return self.threads_per_learner_rank() * self.learner_procs > (os.cpu_count() or 2) // 2

    final_eval_timeout_s: float = Field(default=600.0, ge=0.0)
    """After the learner's last step, how long rollout servers may run their final held-out
    evaluation (only when `rollout.eval` is set) before they are stopped."""
    startup_timeout_s: float = Field(default=600.0, gt=0.0)
    """Longest an env server or the learner may take to become ready."""
    stop_grace_s: float = Field(default=60.0, gt=0.0)
    """After SIGTERM, seconds a child gets to drain or checkpoint before SIGKILL."""

    @model_validator(mode="before")
    @classmethod
    def no_wired_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        problems: list[str] = []
        for key, section, complete in _SECTIONS:
            if isinstance(data.get(key), dict):
                problems += _wired_keys(data[key], section, complete, key)
        if problems:
            raise ValueError("\n".join(problems))
        return data

    @model_validator(mode="after")
    def envs_listed_once(self) -> TrainConfig:
        names = [spec.env for spec in self.env_servers]  # references: their names need an import
        if len(set(names)) != len(names):
            raise ValueError(f"env_servers lists an environment twice: {names}")
        if self.cluster is not None:
            problems = self.cluster.problems(self.learner_procs, self.rollout_servers)
            if problems:
                raise ValueError("\n".join(problems))
        judged = [e.env for e in self.rollout.envs if e.reward.source != "env"]
        if self.mode == "sync" and judged:
            raise ValueError(
                f"mode: sync does not judge: rollout.envs {judged} take a judge's rewards "
                "(reward.source); use mode: async, or source: env"
            )
        return self

    @model_validator(mode="after")
    def init_model_shows_what_the_run_shows(self) -> TrainConfig:
        """A policy created for the run must meet its envs' prompt and action format: one
        warmed up on ```click [3]``` replies never writes the `Action:` line a react run parses."""
        if self.init_model is None:
            return self
        spoken = {spec.env: spec for spec in self.rollout.envs}
        problems: list[str] = []
        for source in self.init_model.sources():
            spec = spoken.get(source.env)
            if spec is None:
                continue
            made = self.init_model.action_format or env_traits(source.env).action_format
            written, read = ActionFormat(made).value, ActionFormat(spec.action_format).value
            if written != read:
                problems.append(
                    f"init_model writes {source.env}'s actions as {written} but rollout.envs "
                    f"reads them as {read}: set init_model.action_format: {read}"
                )
            if source.system_prompt != spec.system_prompt:
                problems.append(
                    f"init_model's system prompt for {source.env} is not the one rollout.envs "
                    "gives it: the created policy would be warmed up on another prompt"
                )
        if problems:
            raise ValueError("\n".join(problems))
        return self


_SECTIONS: tuple[tuple[str, type[BaseModel], type[BaseModel]], ...] = (
    ("rollout", RolloutSection, RolloutConfig),
    ("learn", LearnSection, LearnConfig),
    ("init_model", InitModelSettings, InitModelConfig),
)
"""Train config key, its section model, and the per-process model train completes it to."""


def _wired_keys(
    data: dict[str, Any], section: type[BaseModel], complete: type[BaseModel], path: str
) -> list[str]:
    """A line for each key of `data` (nested too) that the section lacks because `train` fills
    it in: where its value comes from."""
    problems = []
    wired = wired_fields(complete)
    for key, value in data.items():
        where = f"{path}.{key}"
        if key not in section.model_fields and key in wired:
            problems.append(
                f"{where}: train fills this in (from {wired[key].source}); leave it out"
            )
        elif key in section.model_fields and key in complete.model_fields:
            inner = _model_in(section.model_fields[key].annotation)
            outer = _model_in(complete.model_fields[key].annotation)
            if inner is None or outer is None or inner is outer:
                continue
            items = value if isinstance(value, list) else [value]
            for i, item in enumerate(items):
                if isinstance(item, dict):
                    at = f"{where}.{i}" if isinstance(value, list) else where
                    problems += _wired_keys(item, inner, outer, at)
    return problems


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The config model inside `X`, `X | None` or `list[X]`, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType, list):
        for arg in get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


__all__ = ["EnvServerSpec", "LoggingConfig", "RestartConfig", "TrainConfig", "WandbConfig"]
