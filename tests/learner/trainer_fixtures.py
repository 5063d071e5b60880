"""Synthetic encoded groups and learner configs for the trainer tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from agentgym_rl.config.learn import LearnConfig
from agentgym_rl.wire import Status, WireGroup, WireSample, WireTokens


def make_group(
    group_id: int,
    *,
    vocab: int,
    n: int = 4,
    version: int = 0,
    rewards: list[float] | None = None,
    seed: int = 0,
) -> WireGroup:
    """`n` samples: prompt (6 tokens), generated (5), observation (3), generated (4)."""
    rng = np.random.default_rng(seed * 1000 + group_id)
    rewards = rewards if rewards is not None else [float(i % 2) for i in range(n)]
    samples = []
    spans = [(0, 6, 0), (6, 11, 1), (11, 14, 0), (14, 18, 1)]
    for i in range(n):
        ids = rng.integers(3, vocab, size=18).astype(np.uint32)
        mask = np.zeros(18, np.uint8)
        for a, b, gen in spans:
            mask[a:b] = gen
        logprobs = np.where(mask > 0, -3.0, 0.0).astype(np.float32)
        versions = np.where(mask > 0, version, 0).astype(np.uint32)
        tokens = WireTokens(
            input_ids=ids,
            loss_mask=mask,
            logprobs=logprobs,
            versions=versions,
            turn_spans=np.array([[6, 11], [14, 18]], np.uint32),
        )
        samples.append(
            WireSample(
                tokens=tokens,
                reward=rewards[i],
                status=Status.DONE,
                drift=False,
                turns=2,
                turn_cap=6,
                stage=0,
                dispatch_version=version,
                request_id=f"g{group_id}-e{i}",
            )
        )
    return WireGroup(group_id=group_id, task_id=f"babyai_{group_id}", env="babyai", samples=samples)


def learn_config(model_dir: Path, tmp: Path, **overrides: Any) -> LearnConfig:
    data: dict[str, Any] = {
        "model": model_dir,
        "groups_per_step": 2,
        "micro_batch_tokens": 64,
        "optimizer": {"lr": 1e-3, "weight_decay": 0.01, "warmup_steps": 1, "decay": "cosine"},
        "weights": None,
        "checkpoint": {"dir": tmp / "ckpt", "every_steps": 1000},
        "log_dir": tmp / "logs",
        "max_steps": 20,
        # unfused unless a test asks: the compiled kernel costs every process ~14 s of compiling
        # (tests/learner/test_model.py checks the two paths agree)
        "fused_swiglu": False,
    }
    data.update(overrides)
    return LearnConfig.model_validate(data)
