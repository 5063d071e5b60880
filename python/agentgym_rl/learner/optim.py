"""AdamW, the warm-up/decay schedule and tensor/data-parallel aware gradient reduction.

Contract. `build_optimizer` puts matrices in a weight-decay group and vectors (norms, biases)
in a decay-free one. `lr_factor(step)` multiplies the peak learning rate for optimizer step
`step` (0-based): linear warm-up ``(step + 1) / warmup_steps`` for the first ``warmup_steps``
steps, then constant, linear or cosine decay reaching ``min_lr_ratio`` at ``max_steps``.
`allreduce_grads` sums gradients over the data-parallel group (each rank's loss is already
divided by the whole step's token/sequence count). `allreduce_embedding_grads` sums the tied
word embeddings' gradient of the first pipeline stage with the last stage's copy, so both copies
take the same step. `clip_grads` computes the global L2 norm over the tensor and pipeline
stages, counting tensor-parallel shards once, replicated parameters once and the last stage's
copy of tied embeddings not at all, and scales gradients down to `max_norm`.
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


def allreduce_embedding_grads(model: torch.nn.Module) -> None:
    """Tied embeddings under pipeline parallelism: first stage + last stage's copy, summed on
    both (no-op otherwise, and on the stages in between)."""
    if parallel_state.get_pipeline_model_parallel_world_size() == 1:
        return
    if not getattr(model, "share_embeddings_and_output_weights", False):
        return
    if not parallel_state.is_rank_in_embedding_group():
        return
    weight = model.shared_embedding_or_output_weight()  # type: ignore[operator]
    if weight.grad is None:
        weight.grad = torch.zeros_like(weight)
    torch.distributed.all_reduce(weight.grad, group=parallel_state.get_embedding_group())


def clip_grads(params: list[torch.nn.Parameter], max_norm: float | None) -> float:
    """Global gradient L2 norm (before clipping); scales gradients to `max_norm` when above."""
    grads = [p for p in params if p.grad is not None]
    if not grads:
        return 0.0
    sq = torch.zeros((), dtype=torch.float32, device=grads[0].grad.device)  # type: ignore[union-attr]
    tp = parallel_state.get_tensor_model_parallel_world_size()
    tp_rank = parallel_state.get_tensor_model_parallel_rank()
    for p in grads:
        if getattr(p, "shared", False):  # the last stage's copy of tied embeddings
            continue
        # replicated parameters have identical gradients on every tensor-parallel rank
        if tp == 1 or param_is_not_tensor_parallel_duplicate(p) or tp_rank == 0:
            sq += p.grad.detach().float().pow(2).sum()  # type: ignore[union-attr]
    if tp * parallel_state.get_pipeline_model_parallel_world_size() > 1:
        torch.distributed.all_reduce(sq, group=parallel_state.get_model_parallel_group())
    norm = float(sq.sqrt())
    if max_norm is not None and norm > max_norm:
        scale = max_norm / (norm + 1e-6)
        for p in grads:
            p.grad.mul_(scale)  # type: ignore[union-attr]
    return norm
