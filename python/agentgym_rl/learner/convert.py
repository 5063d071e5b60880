"""HF Qwen2/Llama state dicts <-> Megatron-core `GPTModel` state dicts, tensor-parallel aware.

Layout of one tensor-parallel rank r of `tp` (Megatron local layer spec):

- `embedding.word_embeddings.weight`, `output_layer.weight` (untied only): rows of the
  vocabulary padded with zeros to `padded_vocab`, contiguous block r of `tp`.
- `self_attention.linear_qkv.{weight,bias}`: q, k and v interleaved per query group,
  `[q_heads_of_group_0, k_0, v_0, q_heads_of_group_1, k_1, v_1, ...]` (head_dim rows each),
  then split into `tp` contiguous blocks of rows (column parallel).
- `mlp.linear_fc1.weight`: `[gate block r; up block r]` (SwiGLU: Megatron chunks the fc1
  output into gate and up halves on each rank), column parallel.
- `self_attention.linear_proj.weight`, `mlp.linear_fc2.weight`: columns block r (row parallel).
- layer norms: replicated.

`hf_to_megatron` / `megatron_to_hf` are pure functions over dicts (all ranks' shards for the
latter); `load_hf_weights`, `export_hf_weights` and `export_hf_grads` apply them to a live model,
all-gathering the shards over the tensor-parallel group. Outputs may share storage with inputs.

Pipeline parallelism: stage p of `pp` holds decoder layers ``[p * L / pp, (p + 1) * L / pp)``
under local names ``decoder.layers.0..``, the embedding on the first stage and the final norm
and output layer on the last. With tied embeddings and pp > 1 the last stage keeps its own copy
of the word embeddings as `output_layer.weight` (Megatron's layout; the trainer sums its
gradient with the first stage's). `stage_view` cuts a whole-model dict down to one stage and
`merge_stages` puts the stages back together; the live-model functions use them, gathering the
stages over the pipeline group.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from megatron.core import parallel_state
from transformers import PretrainedConfig

from agentgym_rl.learner.model import head_dim_of, qkv_bias_of

__all__ = [
    "ConvertSpec",
    "export_hf_grads",
    "export_hf_weights",
    "hf_to_megatron",
    "load_hf_weights",
    "megatron_to_hf",
    "merge_stages",
    "stage_view",
]

Tensors = dict[str, torch.Tensor]

_REPLICATED = ("input_layernorm.weight", "pre_mlp_layernorm.weight")


@dataclass(frozen=True)
class ConvertSpec:
    """Shapes needed to move weights between the two layouts."""

    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    padded_vocab: int
    tied: bool
    qkv_bias: bool
    tp_size: int

    @classmethod
    def from_hf(cls, hf: PretrainedConfig, tp_size: int, padded_vocab: int) -> ConvertSpec:
        """Spec for `hf` split over `tp_size` ranks with the model's padded vocabulary."""
        if padded_vocab < hf.vocab_size or padded_vocab % tp_size:
            raise ValueError(f"padded_vocab {padded_vocab} invalid for vocab {hf.vocab_size}")
        return cls(
            num_layers=hf.num_hidden_layers,
            num_heads=hf.num_attention_heads,
            num_kv_heads=hf.num_key_value_heads or hf.num_attention_heads,
            head_dim=head_dim_of(hf),
            vocab_size=hf.vocab_size,
            padded_vocab=padded_vocab,
            tied=bool(hf.tie_word_embeddings),
            qkv_bias=qkv_bias_of(hf),
            tp_size=tp_size,
        )

    @property
    def heads_per_group(self) -> int:
        """Query heads sharing one key/value head."""
        return self.num_heads // self.num_kv_heads


def _shard(t: torch.Tensor, tp: int, rank: int, dim: int) -> torch.Tensor:
    if t.size(dim) % tp:
        raise ValueError(f"dim {dim} of shape {tuple(t.shape)} does not split into {tp}")
    return t.chunk(tp, dim=dim)[rank]


def _pad_vocab(t: torch.Tensor, padded: int) -> torch.Tensor:
    if t.size(0) == padded:
        return t
    pad = t.new_zeros((padded - t.size(0), *t.shape[1:]))
    return torch.cat([t, pad], dim=0)


def _interleave_qkv(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, s: ConvertSpec
) -> torch.Tensor:
    """HF q/k/v (weights [out, in] or biases [out]) -> Megatron's per-group interleaved rows."""
    tail = q.shape[1:]
    groups = [
        q.reshape(s.num_kv_heads, s.heads_per_group * s.head_dim, *tail),
        k.reshape(s.num_kv_heads, s.head_dim, *tail),
        v.reshape(s.num_kv_heads, s.head_dim, *tail),
    ]
    return torch.cat(groups, dim=1).reshape(-1, *tail)


def _split_qkv(
    qkv: torch.Tensor, s: ConvertSpec
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse of `_interleave_qkv`."""
    tail = qkv.shape[1:]
    grouped = qkv.reshape(s.num_kv_heads, (s.heads_per_group + 2) * s.head_dim, *tail)
    q, k, v = grouped.split([s.heads_per_group * s.head_dim, s.head_dim, s.head_dim], dim=1)
    return (
        q.reshape(-1, *tail),
        k.reshape(-1, *tail),
        v.reshape(-1, *tail),
    )


def hf_to_megatron(hf_sd: Mapping[str, torch.Tensor], spec: ConvertSpec, tp_rank: int) -> Tensors:
    """The Megatron parameters of tensor-parallel rank `tp_rank` from a full HF state dict."""
    tp = spec.tp_size
    out: Tensors = {}
    embed = _pad_vocab(hf_sd["model.embed_tokens.weight"], spec.padded_vocab)
    out["embedding.word_embeddings.weight"] = _shard(embed, tp, tp_rank, 0)
    if not spec.tied:
        head = _pad_vocab(hf_sd["lm_head.weight"], spec.padded_vocab)
        out["output_layer.weight"] = _shard(head, tp, tp_rank, 0)
    out["decoder.final_layernorm.weight"] = hf_sd["model.norm.weight"]
    for i in range(spec.num_layers):
        hf, mg = f"model.layers.{i}.", f"decoder.layers.{i}."
        attn = hf + "self_attn."
        out[mg + "input_layernorm.weight"] = hf_sd[hf + "input_layernorm.weight"]
        out[mg + "pre_mlp_layernorm.weight"] = hf_sd[hf + "post_attention_layernorm.weight"]
        suffixes = ("weight", "bias") if spec.qkv_bias else ("weight",)
        for suffix in suffixes:
            qkv = _interleave_qkv(
                hf_sd[f"{attn}q_proj.{suffix}"],
                hf_sd[f"{attn}k_proj.{suffix}"],
                hf_sd[f"{attn}v_proj.{suffix}"],
                spec,
            )
            out[f"{mg}self_attention.linear_qkv.{suffix}"] = _shard(qkv, tp, tp_rank, 0)
        out[mg + "self_attention.linear_proj.weight"] = _shard(
            hf_sd[attn + "o_proj.weight"], tp, tp_rank, 1
        )
        gate = _shard(hf_sd[hf + "mlp.gate_proj.weight"], tp, tp_rank, 0)
        up = _shard(hf_sd[hf + "mlp.up_proj.weight"], tp, tp_rank, 0)
        out[mg + "mlp.linear_fc1.weight"] = torch.cat([gate, up], dim=0)
        out[mg + "mlp.linear_fc2.weight"] = _shard(
            hf_sd[hf + "mlp.down_proj.weight"], tp, tp_rank, 1
        )
    return out


def megatron_to_hf(shards: Sequence[Mapping[str, torch.Tensor]], spec: ConvertSpec) -> Tensors:
    """Full HF tensors from every tensor-parallel rank's Megatron dict (`shards[r]` is rank r).

    Replicated tensors are read from rank 0. Tied models yield no `lm_head.weight` (as HF saves
    them). Works equally for parameters and for their gradients.
    """
    if len(shards) != spec.tp_size:
        raise ValueError(f"expected {spec.tp_size} shards, got {len(shards)}")
    first = shards[0]

    def cat(name: str, dim: int) -> torch.Tensor:
        return torch.cat([s[name] for s in shards], dim=dim)

    out: Tensors = {}
    out["model.embed_tokens.weight"] = cat("embedding.word_embeddings.weight", 0)[: spec.vocab_size]
    if not spec.tied:
        out["lm_head.weight"] = cat("output_layer.weight", 0)[: spec.vocab_size]
    out["model.norm.weight"] = first["decoder.final_layernorm.weight"]
    for i in range(spec.num_layers):
        hf, mg = f"model.layers.{i}.", f"decoder.layers.{i}."
        attn = hf + "self_attn."
        out[hf + "input_layernorm.weight"] = first[mg + "input_layernorm.weight"]
        out[hf + "post_attention_layernorm.weight"] = first[mg + "pre_mlp_layernorm.weight"]
        suffixes = ("weight", "bias") if spec.qkv_bias else ("weight",)
        for suffix in suffixes:
            q, k, v = _split_qkv(cat(f"{mg}self_attention.linear_qkv.{suffix}", 0), spec)
            out[f"{attn}q_proj.{suffix}"] = q
            out[f"{attn}k_proj.{suffix}"] = k
            out[f"{attn}v_proj.{suffix}"] = v
        out[attn + "o_proj.weight"] = cat(mg + "self_attention.linear_proj.weight", 1)
        halves = [s[mg + "mlp.linear_fc1.weight"].chunk(2, dim=0) for s in shards]
        out[hf + "mlp.gate_proj.weight"] = torch.cat([h[0] for h in halves], dim=0)
        out[hf + "mlp.up_proj.weight"] = torch.cat([h[1] for h in halves], dim=0)
        out[hf + "mlp.down_proj.weight"] = cat(mg + "mlp.linear_fc2.weight", 1)
    return out


def _is_replicated(name: str) -> bool:
    return name.endswith(_REPLICATED) or name == "decoder.final_layernorm.weight"


_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.*)$")
_EMBED = "embedding.word_embeddings.weight"
_HEAD = "output_layer.weight"


def _layers_per_stage(spec: ConvertSpec, pp: int) -> int:
    if spec.num_layers % pp:
        raise ValueError(f"{spec.num_layers} layers do not split into {pp} pipeline stages")
    return spec.num_layers // pp


def stage_view(
    full: Mapping[str, torch.Tensor], spec: ConvertSpec, pp_rank: int, pp: int
) -> Tensors:
    """The part of a whole-model Megatron dict that pipeline stage `pp_rank` of `pp` holds,
    under the stage's local names (see the module docstring)."""
    if pp == 1:
        return dict(full)
    per = _layers_per_stage(spec, pp)
    first, last = pp_rank == 0, pp_rank == pp - 1
    out: Tensors = {}
    for name, tensor in full.items():
        m = _LAYER.match(name)
        if m is not None:
            layer = int(m.group(1)) - pp_rank * per
            if 0 <= layer < per:
                out[f"decoder.layers.{layer}.{m.group(2)}"] = tensor
        elif name == _EMBED:
            if first:
                out[name] = tensor
            if last and spec.tied:
                out[_HEAD] = tensor  # the last stage's copy of the tied embeddings
        elif last:  # final norm, untied output layer
            out[name] = tensor
    return out


def merge_stages(stages: Sequence[Mapping[str, torch.Tensor]], spec: ConvertSpec) -> Tensors:
    """Inverse of `stage_view`: `stages[p]` is stage p's dict; the tied copy is dropped."""
    pp = len(stages)
    if pp == 1:
        return dict(stages[0])
    per = _layers_per_stage(spec, pp)
    out: Tensors = {}
    for rank, stage in enumerate(stages):
        for name, tensor in stage.items():
            m = _LAYER.match(name)
            if m is not None:
                out[f"decoder.layers.{int(m.group(1)) + rank * per}.{m.group(2)}"] = tensor
            elif not (name == _HEAD and spec.tied):
                out[name] = tensor
    return out


def _pipeline() -> tuple[int, int]:
    return (
        parallel_state.get_pipeline_model_parallel_rank(),
        parallel_state.get_pipeline_model_parallel_world_size(),
    )


def _gather_stages(shards: list[Tensors], spec: ConvertSpec) -> list[Tensors]:
    """Every tensor-parallel shard of the whole model: each stage's shards, all-gathered over
    the pipeline group (objects: a stage's shapes differ from its neighbours')."""
    _, pp = _pipeline()
    if pp == 1:
        return shards
    gathered: list[list[Tensors] | None] = [None] * pp
    torch.distributed.all_gather_object(
        gathered, shards, group=parallel_state.get_pipeline_model_parallel_group()
    )
    return [
        merge_stages([stage[r] for stage in gathered], spec)  # type: ignore[index]
        for r in range(len(shards))
    ]


def _gather_shards(local: Mapping[str, torch.Tensor]) -> list[Tensors]:
    """All-gather every sharded tensor over the tensor-parallel group: one dict per rank."""
    tp = parallel_state.get_tensor_model_parallel_world_size()
    if tp == 1:
        return [dict(local)]
    group = parallel_state.get_tensor_model_parallel_group()
    shards: list[Tensors] = [{} for _ in range(tp)]
    for name, tensor in local.items():
        if _is_replicated(name):
            for shard in shards:
                shard[name] = tensor
            continue
        parts = [torch.empty_like(tensor) for _ in range(tp)]
        torch.distributed.all_gather(parts, tensor.contiguous(), group=group)
        for shard, part in zip(shards, parts, strict=True):
            shard[name] = part
    return shards


def load_hf_weights(
    model: torch.nn.Module, hf_sd: Mapping[str, torch.Tensor], spec: ConvertSpec
) -> None:
    """Copy a full HF state dict into this rank's Megatron parameters (every name must match)."""
    pp_rank, pp = _pipeline()
    full = hf_to_megatron(hf_sd, spec, parallel_state.get_tensor_model_parallel_rank())
    local = stage_view(full, spec, pp_rank, pp)
    params = dict(model.named_parameters())
    if set(params) != set(local):
        missing, extra = set(params) - set(local), set(local) - set(params)
        raise KeyError(f"name mismatch: model-only {sorted(missing)}, hf-only {sorted(extra)}")
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(local[name])


def _export(
    model: torch.nn.Module, spec: ConvertSpec, pick: Callable[[torch.nn.Parameter], torch.Tensor]
) -> Tensors:
    local = {name: pick(p).detach() for name, p in model.named_parameters()}
    return megatron_to_hf(_gather_stages(_gather_shards(local), spec), spec)


def export_hf_weights(model: torch.nn.Module, spec: ConvertSpec) -> Tensors:
    """Full HF-named weights, gathered over tensor and pipeline parallel (collective: every
    rank of the model-parallel group calls)."""
    return _export(model, spec, lambda p: p)


def _grad_of(p: torch.nn.Parameter) -> torch.Tensor:
    grad = getattr(p, "main_grad", None)  # Megatron DDP accumulates here
    if grad is None:
        grad = p.grad
    return torch.zeros_like(p) if grad is None else grad


def export_hf_grads(model: torch.nn.Module, spec: ConvertSpec) -> Tensors:
    """Gradients under full HF names, gathered over tensor and pipeline parallel (zeros where
    none; with tied embeddings and pp > 1, the first stage's embedding gradient)."""
    return _export(model, spec, _grad_of)
