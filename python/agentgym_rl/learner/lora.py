"""Low-rank adapters on Megatron-core's parallel linear layers (`learn.lora`).

Contract: `add_adapters(model, rank, alpha, targets, dropout)` gives each targeted layer of `model`
(`attention`: `linear_qkv` and `linear_proj`; `mlp`: `linear_fc1` and `linear_fc2`) two new
parameters, `lora_a` [rank, in] and `lora_b` [out, rank], and a forward hook that adds
`alpha / rank * B(A(x))` to the layer's output; A starts as Kaiming-uniform, B at zero, so the
adapted model starts exactly as the base. `dropout` drops the adapter's input (not the base's)
in passes that build a gradient only (the training forward, whose log-probs then carry its noise,
as any PPO with dropout does); passes without one (a recomputed proximal policy, an export) have
none. Every other parameter is frozen (`requires_grad`
False: no gradient, no optimizer state). Names stay the base's (`...linear_qkv.weight`), the
adapters beside them (`...linear_qkv.lora_a`), so weight conversion reads the base as before,
and `merged(model)` folds the adapters into the weights for an export of full weights.

Tensor parallelism keeps the base layer's split: a column-parallel layer (its output split
across ranks) holds A whole and B's rows of this rank, and the gradient reaching A is summed
over ranks (`copy_to_tensor_model_parallel_region` after A); a row-parallel layer (its input
split) holds A's columns of this rank and B whole, and A's partial products are summed before
B (`reduce_from_tensor_model_parallel_region`). The sharded halves carry Megatron's
tensor-parallel attributes, so gradient clipping counts them once.

`adapters_disabled(model)` runs the base model (the reference policy of the KL term: no second
copy); `adapter_state(model)` and `load_adapter_state` read and set this rank's adapters by
parameter name (checkpoints go through the layers' sharded state dict, the weight stream through
`convert.export_hf_adapters`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from megatron.core.tensor_parallel import (
    ColumnParallelLinear,
    RowParallelLinear,
    copy_to_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    set_tensor_model_parallel_attributes,
)
from megatron.core.transformer.mlp import apply_swiglu_sharded_factory
from megatron.core.transformer.utils import make_sharded_tensors_for_checkpoint

TARGETS = {"attention": ("linear_qkv", "linear_proj"), "mlp": ("linear_fc1", "linear_fc2")}
ADAPTER_SUFFIXES = (".lora_a", ".lora_b")


class LoraError(ValueError):
    """Adapters asked for where none can go (no targeted layer, an unknown target)."""


def add_adapters(
    model: torch.nn.Module,
    rank: int,
    alpha: float,
    targets: Sequence[str],
    dropout: float = 0.0,
) -> list[str]:
    """Adapt `model` in place (see the module docstring); the adapter parameters' names."""
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        raise LoraError(f"lora targets {unknown}: not one of {sorted(TARGETS)}")
    wanted = {name for t in targets for name in TARGETS[t]}
    for p in model.parameters():
        p.requires_grad_(False)
    adapted = []
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] not in wanted:
            continue
        if isinstance(module, ColumnParallelLinear):
            # a gated MLP's fc1 holds [gate; up] rows of this rank: so does B
            gated = name.endswith("linear_fc1") and module.config.gated_linear_unit
            _adapt(module, rank, alpha, dropout, split="out", gated=gated)
        elif isinstance(module, RowParallelLinear):
            _adapt(module, rank, alpha, dropout, split="in")
        else:
            raise LoraError(f"{name}: a {type(module).__name__}, not a parallel linear layer")
        adapted += [name + s for s in ADAPTER_SUFFIXES]
    if not adapted:
        raise LoraError(f"no layer of the model is one of {sorted(wanted)}")
    return adapted


def _adapt(
    layer: torch.nn.Module, rank: int, alpha: float, dropout: float, split: str, gated: bool = False
) -> None:
    weight = layer.weight  # [out, in] of this rank
    out_features, in_features = weight.shape
    a = torch.empty(rank, in_features, dtype=weight.dtype, device=weight.device)
    torch.nn.init.kaiming_uniform_(a, a=math.sqrt(5))
    b = torch.zeros(out_features, rank, dtype=weight.dtype, device=weight.device)
    layer.lora_a = torch.nn.Parameter(a)
    layer.lora_b = torch.nn.Parameter(b)
    # the split half holds this rank's rows (B of a column layer) or columns (A of a row layer)
    sharded, dim = (layer.lora_b, 0) if split == "out" else (layer.lora_a, 1)
    set_tensor_model_parallel_attributes(sharded, True, dim, 1)
    layer.lora_scale = alpha / rank
    layer.lora_dropout = dropout
    layer.lora_split = split
    layer.lora_enabled = True
    layer.register_forward_hook(_add_low_rank)
    # checkpoints shard the split half as the weight is sharded (the base layer's own
    # sharded_state_dict would save every rank's part under one replicated key)
    axes = {"weight": 0, "bias": 0, "lora_b": 0} if split == "out" else {"weight": 1, "lora_a": 1}

    def sharded_state_dict(
        prefix: str = "", sharded_offsets: Any = (), metadata: Any = None
    ) -> Any:
        state = make_sharded_tensors_for_checkpoint(
            layer.state_dict(prefix="", keep_vars=True),
            prefix,
            axes,
            sharded_offsets,
            tp_group=layer.tp_group,
            dp_cp_group=metadata["dp_cp_group"],
        )
        if gated:  # saved as the MLP saves fc1's weight: gate and up halves apart, so that
            # another tensor-parallel size loads each rank's [gate; up] rows in their order
            key = f"{prefix}lora_b"
            singleton = metadata.get("singleton_local_shards", False)
            state[key] = apply_swiglu_sharded_factory(state[key], sharded_offsets, singleton)
        return state

    layer.sharded_state_dict = sharded_state_dict


def _add_low_rank(layer: torch.nn.Module, args: tuple[Any, ...], output: Any) -> Any:
    if not layer.lora_enabled:
        return output
    out, bias = output
    x = args[0]
    if layer.lora_dropout > 0.0 and layer.training and torch.is_grad_enabled():
        x = torch.nn.functional.dropout(x, layer.lora_dropout)
    h = torch.nn.functional.linear(x, layer.lora_a)
    if layer.lora_split == "out":
        h = copy_to_tensor_model_parallel_region(h)  # backward: A's gradient summed over ranks
    else:
        h = reduce_from_tensor_model_parallel_region(h)  # the ranks' partial A x summed
    delta = torch.nn.functional.linear(h, layer.lora_b) * layer.lora_scale
    return out + delta.to(out.dtype), bias


def adapted_layers(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    return (m for m in model.modules() if hasattr(m, "lora_enabled"))


@contextlib.contextmanager
def adapters_disabled(model: torch.nn.Module) -> Iterator[None]:
    """Inside, `model` runs as its base (the KL term's reference policy)."""
    layers = list(adapted_layers(model))
    for m in layers:
        m.lora_enabled = False
    try:
        yield
    finally:
        for m in layers:
            m.lora_enabled = True


@contextlib.contextmanager
def merged(model: torch.nn.Module) -> Iterator[None]:
    """Inside, each adapted layer's weight holds the base plus its adapter, `scale * B A` (of
    this rank's shape: B's rows by A, or B by A's columns), and the adapters are off: what an
    export of full weights reads. The base weights are restored exactly on leaving."""
    layers = list(adapted_layers(model))
    saved = [m.weight.detach().clone() for m in layers]
    with torch.no_grad():
        for m in layers:
            m.weight.add_((m.lora_b @ m.lora_a * m.lora_scale).to(m.weight.dtype))
            m.lora_enabled = False
    try:
        yield
    finally:
        with torch.no_grad():
            for m, w in zip(layers, saved, strict=True):
                m.weight.copy_(w)
                m.lora_enabled = True


def is_adapter(name: str) -> bool:
    return name.endswith(ADAPTER_SUFFIXES)


def adapter_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The adapters of this rank, by parameter name."""
    return {
        name: p.detach() for name, p in model.named_parameters() if name.endswith(ADAPTER_SUFFIXES)
    }


def load_adapter_state(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Set the adapters from `adapter_state`'s dict; a missing or extra name
    raises `LoraError` naming it."""
    own = dict(model.named_parameters())
    mine = {n for n in own if n.endswith(ADAPTER_SUFFIXES)}
    if set(state) != mine:
        missing, extra = sorted(mine - set(state)), sorted(set(state) - mine)
        raise LoraError(
            f"adapter checkpoint does not fit: missing {missing[:3]}, extra {extra[:3]}"
        )
    with torch.no_grad():
        for name, value in state.items():
            own[name].copy_(value)
