"""`LearnConfig`: shipped YAML, defaults, cross-field checks with key paths, torch-free import."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym_rl.config import ConfigError, load_learn_config

ROOT = Path(__file__).resolve().parents[2]
YAML = ROOT / "configs" / "learn" / "babyai_tiny.yaml"


def test_shipped_yaml_and_overrides() -> None:
    config = load_learn_config(YAML, ["optimizer.lr=3e-4", "weights=null"])
    assert config.optimizer.lr == 3e-4
    assert config.weights is None
    assert config.optimizer.decay == "cosine"
    assert config.loss.clip_eps_high == 0.28


def test_minimal_defaults() -> None:
    config = load_learn_config(None, ["model=/models/tiny"])
    assert config.optimizer.grad_clip == 1.0
    assert config.advantage.estimator == "grpo"
    assert config.parallel.tp == 1 and config.loss.correction == "tis"


def test_precision_and_idle_timeout() -> None:
    config = load_learn_config(None, ["model=/m"])
    assert config.precision == "fp32" and config.receive.idle_timeout_s == 600.0
    config = load_learn_config(None, ["model=/m", "precision=bf16", "receive.idle_timeout_s=null"])
    assert config.precision == "bf16" and config.receive.idle_timeout_s is None


def test_weights_relay_tree_defaults_and_star() -> None:
    config = load_learn_config(None, ["model=/m"])
    assert config.weights is not None
    assert config.weights.fanout == 2 and config.weights.relay_stall_s == 5.0
    config = load_learn_config(None, ["model=/m", "weights.fanout=64"])  # a star up to 64
    assert config.weights is not None and config.weights.fanout == 64


def test_kl_and_entropy_are_accepted() -> None:
    config = load_learn_config(None, ["model=/m", "loss.kl_coef=1e-3", "loss.entropy_coef=-0.01"])
    assert config.loss.kl_coef == 1e-3 and config.loss.entropy_coef == -0.01


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["groups_per_step=3", "parallel.dp=2"], "multiple of parallel.dp"),
        (["micro_batch_tokens=1001", "parallel.tp=2"], "multiple of parallel.tp"),
        (["parallel.pp=0"], "parallel.pp"),
        (["micro_batch_overhead_tokens=-1"], "micro_batch_overhead_tokens"),
        (["optimizer.warmup_steps=10", "max_steps=5"], "warmup_steps"),
        (
            ["loss.aggregation=seq-mean-token-sum-norm"],
            "loss: aggregation seq-mean-token-sum-norm needs",
        ),
        (["loss.kl_coef=-0.1"], "loss.kl_coef"),
        (["loss.entropy_coef=nan"], "loss.entropy_coef"),
        (["optimizer.decay=exp"], "optimizer.decay"),
        (["receive.bind=localhost:5555"], "receive.bind"),
        (["receive.bind=tcp://127.0.0.1:5", "weights.endpoint=tcp://127.0.0.1:5"], "must differ"),
        (["optimizer.betas=[0.9, 1.0]"], "optimizer.betas"),
        (["receive.idle_timeout_s=0"], "receive.idle_timeout_s"),
        (["precision=fp16"], "precision"),
        (["weights.fanout=0"], "weights.fanout"),
        (["weights.relay_stall_s=0"], "weights.relay_stall_s"),
        (["lora.rank=600"], "lora.rank"),
        (["lora.dropout=1.0"], "lora.dropout"),
        (["lora.targets=[embeddings]"], "lora.targets"),
        (["bogus=1"], "bogus"),
        ([], "model"),
    ],
)
def test_errors_name_their_key(overrides: list[str], needle: str) -> None:
    base = [] if not overrides else ["model=/m"]
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        load_learn_config(None, [*base, *overrides])
