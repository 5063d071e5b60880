"""Typed configuration of the `learn` process (torch-free: pydantic only).

Contract: a `LearnConfig` that validates is internally consistent: groups per step split evenly
over the data-parallel ranks, the micro-batch budget is a multiple of the tensor-parallel
padding, warm-up fits in the run, every endpoint is a ZeroMQ `tcp://HOST:PORT` or `ipc://PATH`
(a bind endpoint may use `*` or port 0), and the loss options are consistent. `LossConfig` is
also the loss's runtime settings: `learner.losses.policy_loss` reads it as validated here.
`temperature` must equal the rollout engine's sampling temperature (the engine reports
processed log-probs, the learner recomputes them at the same temperature). `LearnSection` is the
`learn:` section of a train config: the same settings without the fields marked `Wired`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import Field, field_validator, model_validator

from agentgym_rl.config.auth import AuthConfig
from agentgym_rl.config.base import ConfigModel, Wired
from agentgym_rl.config.rollout import GROUPS_PER_STEP, MAX_STALENESS

_BIND_ENDPOINT = re.compile(r"^(tcp://(\*|[^\s:/]+):\d{1,5}|ipc://\S+)$")

Aggregation = Literal[
    "token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"
]
"""How per-token losses reduce to one number (see `learner/losses.py`)."""
Correction = Literal["none", "decoupled", "tis"]
"""Off-policy correction between the behaviour and proximal policies."""
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)


def check_bind_endpoint(value: str) -> str:
    if not _BIND_ENDPOINT.match(value):
        raise ValueError(f"{value!r} is not a ZeroMQ bind endpoint tcp://HOST:PORT or ipc://PATH")
    return value


class ParallelConfig(ConfigModel):
    """Megatron model parallelism; data parallelism is the rest of the torchrun world."""

    tp: int = Field(default=1, ge=1)
    """Tensor-parallel size."""
    pp: int = Field(default=1, ge=1)
    """Pipeline-parallel size: the model's layers split evenly into `pp` stages (GPipe schedule,
    `learner/pipeline.py`)."""
    dp: int = Field(default=1, ge=1)
    """Expected data-parallel size; start-up checks world size == tp * pp * dp."""


class ReceiveConfig(ConfigModel):
    """The `GroupReceiver` rollout servers stream finished groups to."""

    bind: str = "tcp://127.0.0.1:5555"
    """Endpoint to bind (rank 0 only; it deals groups to the data-parallel ranks)."""
    window: int = Field(default=16, ge=1)
    """Credits granted to each sender (groups in flight per rollout server)."""
    poll_s: float = Field(default=0.5, gt=0.0)
    """Seconds one receive call waits before checking for shutdown."""
    idle_timeout_s: float | None = Field(default=600.0, gt=0.0)
    """Stop when no usable group arrives for this long (none at all, or every one rejected or
    dropped as stale): checkpoint, then exit 3 with the reason in words. None waits forever;
    either way the reason is logged every minute and written to `log_dir/waiting.jsonl`."""

    @field_validator("bind")
    @classmethod
    def bind_is_zmq(cls, value: str) -> str:
        return check_bind_endpoint(value)


class StepCreditConfig(ConfigModel):
    """Step-level credit (GiGPO-style, `learner/step_credit.py`): the turns of a group's
    episodes that acted from the same state (equal state keys) form a step group, and each turn
    gets, on its trained tokens, `weight` x its return's standing in that group on top of the
    episode's advantage. A turn whose state no other turn of its group shared gets nothing more."""

    weight: float = Field(default=1.0, ge=0.0)
    """How much of the step advantage is added to the episode advantage (0: none)."""
    turn_gamma: float = Field(default=0.95, ge=0.0, le=1.0)
    """Discount across turns of the per-turn rewards a turn's return sums (the turn's own reward,
    then the next turn's x turn_gamma, ...); apart from REINFORCE++'s token-level `gamma`.
    0.95 is GiGPO's; 1.0 (the step-credit studies') makes every return of a sparse-reward
    episode its whole reward, so the first state repeats the episode's advantage."""
    divide_by_std: bool = True
    """Divide by the step group's standard deviation (else only subtract its mean)."""


class AdvantageConfig(ConfigModel):
    """How per-token advantages are computed from group rewards."""

    estimator: Literal["grpo", "dr_grpo", "rloo", "reinforce_plus_plus"] = "grpo"
    """GRPO (default), Dr.GRPO, RLOO or REINFORCE++."""
    eps: float = Field(default=1e-6, gt=0.0)
    """Added to the standard deviation before dividing."""
    gamma: float = Field(default=1.0, ge=0.0, le=1.0)
    """Discount of REINFORCE++ returns."""
    unbiased_std: bool = True
    """Sample (n - 1) standard deviation, as the reference."""
    per_env_scale: bool = False
    """Mixed runs: divide each env's advantages by their std over its tokens in the step, so
    that an env with larger rewards does not dominate. Off by default: `grpo` already divides
    every group by its own std, so each env's advantages are unit-scale; turn it on with
    `dr_grpo`, `rloo` or `reinforce_plus_plus` when the envs' reward scales differ."""
    step: StepCreditConfig | None = None
    """Step-level credit on top of the estimator's (None: every turn of an episode trains with
    the episode's advantage). Works with every estimator."""


class LossConfig(ConfigModel):
    """Policy-loss options, read as they are by `agentgym_rl.learner.losses.policy_loss`;
    defaults are GRPO with PPO clip 0.2 and TIS cap 2.0."""

    clip_eps_low: float = Field(default=0.2, gt=0.0, lt=1.0)
    """PPO clip below 1."""
    clip_eps_high: float = Field(default=0.2, gt=0.0)
    """PPO clip above 1 (0.28 for DAPO clip-higher)."""
    correction: Correction = "tis"
    """Off-policy correction between behaviour and proximal policies."""
    tis_cap: float = Field(default=2.0, gt=0.0)
    """Truncated importance-sampling cap."""
    decoupled_cap: float | None = Field(default=None, gt=0.0)
    """Tokens whose decoupled weight exceeds this are dropped (None: keep all)."""
    kl_coef: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    """k3 KL-to-reference coefficient (0: off; > 0 keeps a frozen copy of the starting model)."""
    entropy_coef: float = Field(default=0.0, allow_inf_nan=False)
    """Entropy bonus coefficient: the loss gets ``- entropy_coef * entropy`` (0: off)."""
    track_entropy: bool = False
    """Log the policy's mean per-token entropy over trained tokens (`entropy`) every step even
    without a bonus: one more softmax over the vocabulary per trained token."""
    aggregation: Aggregation = "token-mean"
    """How per-token losses reduce to the step's loss."""
    norm_constant: float | None = Field(default=None, gt=0.0)
    """Divisor of seq-mean-token-sum-norm (Dr.GRPO), e.g. the max generated tokens."""

    @model_validator(mode="after")
    def options_are_consistent(self) -> LossConfig:
        if self.aggregation == "seq-mean-token-sum-norm" and self.norm_constant is None:
            raise ValueError("aggregation seq-mean-token-sum-norm needs norm_constant")
        return self


class OptimizerConfig(ConfigModel):
    """AdamW with linear warm-up, then constant, linear or cosine decay."""

    lr: float = Field(default=1e-6, gt=0.0)
    """Peak learning rate."""
    betas: tuple[float, float] = (0.9, 0.999)
    """Adam betas."""
    eps: float = Field(default=1e-8, gt=0.0)
    """Adam epsilon."""
    weight_decay: float = Field(default=0.01, ge=0.0)
    """Decoupled weight decay."""
    warmup_steps: int = Field(default=0, ge=0)
    """Steps of linear warm-up from 0 to `lr`."""
    decay: Literal["constant", "linear", "cosine"] = "constant"
    """Schedule after warm-up, down to `min_lr_ratio * lr` at `max_steps`."""
    min_lr_ratio: float = Field(default=0.0, ge=0.0, le=1.0)
    """Floor of the decayed learning rate as a fraction of `lr`."""
    grad_clip: float | None = Field(default=1.0, gt=0.0)
    """Global gradient-norm clip (None: off)."""

    @field_validator("betas")
    @classmethod
    def betas_in_range(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not all(0.0 <= b < 1.0 for b in value):
            raise ValueError(f"betas must be in [0, 1), got {value}")
        return value


class WeightsConfig(ConfigModel):
    """Publishing new weights to rollout servers."""

    endpoint: str = "tcp://127.0.0.1:5557"
    """`WeightPublisher` bind endpoint rollout servers subscribe to."""
    every_steps: int = Field(default=1, ge=1)
    """Publish after every this many optimizer steps."""
    timeout_s: float = Field(default=30.0, gt=0.0)
    """Longest a publish waits for acks (a slow server catches up at the next version)."""
    fanout: int = Field(default=2, ge=1)
    """Relay tree: the learner sends each update to this many rollout servers and each of them
    relays it to up to this many more, so the learner's egress is `fanout` copies whatever the
    number of servers (1: a chain; at least the number of servers: every server is sent the
    update by the learner, a star)."""
    relay_stall_s: float = Field(default=5.0, gt=0.0)
    """A relay reports a child that took no chunk for this long; the learner then sends that
    child the update itself (keep it well under `timeout_s`)."""

    @field_validator("endpoint")
    @classmethod
    def endpoint_is_zmq(cls, value: str) -> str:
        return check_bind_endpoint(value)


class CheckpointSettings(ConfigModel):
    """Periodic resumable checkpoints plus an HF export."""

    every_steps: int = Field(default=100, ge=1)
    """Save after every this many optimizer steps (and at the last step)."""
    export_hf: bool = True
    """Also write `hf/` (model.safetensors, config, tokenizer) that transformers loads."""


class CheckpointConfig(CheckpointSettings):
    """Periodic resumable checkpoints plus an HF export, and where they go."""

    dir: Annotated[Path, Wired("run_dir/checkpoints")] = Path("runs/learn/checkpoints")
    """Holds `step_<n>/` directories (complete when they contain `COMPLETE`)."""


LoraTarget = Literal["attention", "mlp"]
LORA_TARGETS: tuple[LoraTarget, ...] = ("attention", "mlp")


class LoraConfig(ConfigModel):
    """Low-rank adapters: the base weights frozen, only `rank`-sized adapters on the targeted
    layers trained (`learner/lora.py`)."""

    rank: int = Field(default=16, ge=1, le=512)
    """The adapters' rank r: A is r x in, B is out x r (vLLM serves up to 512)."""
    alpha: float = Field(default=32.0, gt=0.0)
    """The adapters' output is scaled by alpha / rank."""
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Dropout on the adapters' input, in the training forward only: its log-probs (the policy
    ratio's, and the proximal policy's unless `recompute_proximal`) carry the noise, as in any
    PPO with dropout; passes without a gradient have none. RL recipes keep it 0."""
    targets: list[LoraTarget] = Field(default_factory=lambda: [*LORA_TARGETS], min_length=1)
    """Which layers get adapters, by role: `attention` (the fused QKV and output projections),
    `mlp` (the fused gate/up and down projections)."""


class TokenLogConfig(ConfigModel):
    """The per-token record behind the run viewer's token view (`learner/token_log.py`): each
    logged sample's learner and behaviour log-probs, entropy, off-policy weight, PPO ratio and
    clipped tokens, ~13 bytes a trained token on disk."""

    samples_per_step: int = Field(default=2, ge=1)
    """Samples logged each logged step, spread over the batch."""
    every_steps: int = Field(default=1, ge=1)
    """Log every this many steps (the learner computes the entropy on those steps only)."""


class LearnSettings(ConfigModel):
    """What a `learn` process is told besides its wiring (`LearnConfig` minus the wiring)."""

    parallel: ParallelConfig = ParallelConfig()
    """Tensor/pipeline/data parallel sizes."""
    receive: ReceiveConfig = ReceiveConfig()
    """Where groups arrive (a train config that leaves `bind` out gets a free port)."""
    advantage: AdvantageConfig = AdvantageConfig()
    """Advantage estimator."""
    loss: LossConfig = LossConfig()
    """Policy-loss options."""
    optimizer: OptimizerConfig = OptimizerConfig()
    """AdamW and learning-rate schedule."""
    precision: Literal["fp32", "bf16"] = "fp32"
    """Forward-pass precision. bf16: the model's forward runs under bf16 autocast (CPU and GPU)
    while weights, gradients, optimizer state, log-softmax and loss stay fp32."""
    fused_swiglu: bool = True
    """Megatron's fused SwiGLU kernel (`bias_activation_fusion`). Compiled by torch.compile on
    first use (on CPU this needs a C++ compiler); false keeps the unfused chunk-silu-multiply."""
    micro_batch_tokens: int = Field(default=8192, ge=1)
    """Padded tokens per micro-batch (gradient accumulation over micro-batches)."""
    micro_batch_overhead_tokens: int | None = Field(default=None, ge=0)
    """What one more micro-batch costs, in padded tokens (its fixed cost per pass): a step's
    rows, longest first, are cut into micro-batches where the padded tokens computed plus this
    per micro-batch are fewest. null: the fewest micro-batches, and among those the least
    padding (right where a pass's fixed cost is large, as on a GPU). `benches/bench_padding.py`
    measures it: ~100 on 2 CPU cores for a 2M model."""
    token_log: TokenLogConfig | None = TokenLogConfig()
    """Per-token record of a few samples a step for the viewer's token view (None: off)."""
    recompute_proximal: bool = False
    """Recompute proximal log-probs in a separate no-grad pass before the update (the same
    numbers as the detached training forward with one optimizer step per batch; kept for
    checking that)."""
    lora: LoraConfig | None = None
    """Train low-rank adapters instead of every weight (None: full fine-tuning). The KL term's
    reference is then the base model with the adapters off, and checkpoints hold the adapters
    alone."""
    weights: WeightsConfig | None = WeightsConfig()
    """Weight publishing (None: never publish, e.g. offline training; a train config that leaves
    `endpoint` out gets a free port)."""
    auth: AuthConfig = AuthConfig()
    """The secret that signs every group and weight message."""
    max_steps: int = Field(default=1000, ge=1)
    """Optimizer steps to run."""
    seed: int = Field(default=0, ge=0)
    """Seed of parameter init noise and Megatron's RNG."""


class LearnSection(LearnSettings):
    """The `learn:` section of a train config: `train` adds the wiring to make the learner's
    `LearnConfig` (`supervise/plan.py`)."""

    checkpoint: CheckpointSettings = CheckpointSettings()
    """Checkpoints (they go to run_dir/checkpoints)."""


class LearnConfig(LearnSettings):
    """Everything one `learn` process (or torchrun job) needs."""

    model: Annotated[Path, Wired("model")]
    """Local HF checkpoint directory (config.json, safetensors, tokenizer) to start from."""
    groups_per_step: Annotated[int, Wired("groups_per_step"), Field(ge=1)] = GROUPS_PER_STEP
    """Groups per optimizer step (B), split evenly over data-parallel ranks."""
    max_staleness: Annotated[int, Wired("max_staleness"), Field(ge=0)] = MAX_STALENESS
    """Groups whose oldest token lags the policy by more versions are dropped (counted)."""
    temperature: Annotated[float, Wired("rollout.engine.temperature"), Field(gt=0.0, le=10.0)] = 1.0
    """Sampling temperature of the rollout engine; log-probs are recomputed at it."""
    checkpoint: CheckpointConfig = CheckpointConfig()
    """Checkpoints."""
    log_dir: Annotated[Path, Wired("run_dir/learn")] = Path("runs/learn")
    """`metrics.jsonl` (one record per step) goes here."""

    @model_validator(mode="after")
    def sizes_divide(self) -> LearnConfig:
        dp, tp = self.parallel.dp, self.parallel.tp
        if self.groups_per_step % dp:
            raise ValueError(
                f"groups_per_step ({self.groups_per_step}) must be a multiple of parallel.dp ({dp})"
            )
        if self.micro_batch_tokens % tp:
            raise ValueError(
                f"micro_batch_tokens ({self.micro_batch_tokens}) must be a multiple of "
                f"parallel.tp ({tp})"
            )
        if self.optimizer.warmup_steps >= self.max_steps and self.optimizer.warmup_steps > 0:
            raise ValueError(
                f"optimizer.warmup_steps ({self.optimizer.warmup_steps}) must be below "
                f"max_steps ({self.max_steps})"
            )
        if self.weights is not None and self.weights.endpoint == self.receive.bind:
            raise ValueError("weights.endpoint and receive.bind must differ")
        return self

    @property
    def endpoints(self) -> list[str]:
        """Every endpoint this process binds (what `auth` protects)."""
        return [self.receive.bind] + ([self.weights.endpoint] if self.weights else [])


__all__ = [
    "AGGREGATIONS",
    "AdvantageConfig",
    "Aggregation",
    "CheckpointConfig",
    "CheckpointSettings",
    "Correction",
    "LearnConfig",
    "LearnSection",
    "LearnSettings",
    "LossConfig",
    "OptimizerConfig",
    "ParallelConfig",
    "ReceiveConfig",
    "StepCreditConfig",
    "TokenLogConfig",
    "WeightsConfig",
    "check_bind_endpoint",
]
