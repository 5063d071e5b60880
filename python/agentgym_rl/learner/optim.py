"""AdamW, the warm-up/decay schedule and tensor/data-parallel aware gradient reduction.

Contract. `build_optimizer` puts matrices in a weight-decay group and vectors (norms, biases)
in a decay-free one. `lr_factor(step)` multiplies the peak learning rate for optimizer step
`step` (0-based): linear warm-up ``(step + 1) / warmup_steps`` for the first ``warmup_steps``
steps, then constant, linear or cosine decay reaching ``min_lr_ratio`` at ``max_steps``.
`allreduce_grads` sums gradients over the data-parallel group (each rank's loss is already
divided by the whole step's token/sequence count). `clip_grads` computes the global L2 norm
counting tensor-parallel shards once and replicated parameters once, and scales gradients
down to `max_norm`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from megatron.core import parallel_state
from megatron.core.tensor_parallel import param_is_not_tensor_parallel_duplicate

from agentgym_rl.config.learn import OptimizerConfig


def build_optimizer(model: torch.nn.Module, cfg: OptimizerConfig) -> torch.optim.AdamW:
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)


def lr_schedule(cfg: OptimizerConfig, max_steps: int) -> Callable[[int], float]:
    """The learning-rate multiplier of optimizer step `step` (see the module docstring)."""
    warmup, floor = cfg.warmup_steps, cfg.min_lr_ratio

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if cfg.decay == "constant":
            return 1.0
        progress = min(1.0, (step - warmup) / max(1, max_steps - warmup))
        if cfg.decay == "linear":
            return 1.0 - (1.0 - floor) * progress
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def allreduce_grads(params: Iterable[torch.nn.Parameter]) -> None:
    """Sum gradients over the data-parallel group (no-op with one data-parallel rank)."""
    if parallel_state.get_data_parallel_world_size() == 1:
        return
    group = parallel_state.get_data_parallel_group()
    for p in params:
        if p.grad is not None:
            torch.distributed.all_reduce(p.grad, group=group)


def clip_grads(params: list[torch.nn.Parameter], max_norm: float | None) -> float:
    """Global gradient L2 norm (before clipping); scales gradients to `max_norm` when above."""
    grads = [p for p in params if p.grad is not None]
    if not grads:
        return 0.0
    sq = torch.zeros((), dtype=torch.float32, device=grads[0].grad.device)  # type: ignore[union-attr]
    tp = parallel_state.get_tensor_model_parallel_world_size()
    tp_rank = parallel_state.get_tensor_model_parallel_rank()
    for p in grads:
        # replicated parameters have identical gradients on every tensor-parallel rank
        if tp == 1 or param_is_not_tensor_parallel_duplicate(p) or tp_rank == 0:
            sq += p.grad.detach().float().pow(2).sum()  # type: ignore[union-attr]
    if tp > 1:
        torch.distributed.all_reduce(sq, group=parallel_state.get_tensor_model_parallel_group())
    norm = float(sq.sqrt())
    if max_norm is not None and norm > max_norm:
        scale = max_norm / (norm + 1e-6)
        for p in grads:
            p.grad.mul_(scale)  # type: ignore[union-attr]
    return norm
