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

Names: `name_table(spec)` is the one HF <-> Megatron name map (each row a Megatron tensor, the
HF tensors it is made of and its layout above: `vocab`, `qkv`, `gate_up`, `row` or
`replicated`); both directions read it, so a name cannot map one way and not back.
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
from typing import Literal

import torch
from megatron.core import parallel_state
from transformers import PretrainedConfig

from agentgym_rl.learner.lora import is_adapter
from agentgym_rl.learner.model import head_dim_of, qkv_bias_of
from agentgym_rl.weights.peft import PEFT_PREFIX

__all__ = [
    "ConvertSpec",
    "NameRule",
    "export_hf_grads",
    "export_hf_weights",
    "hf_to_megatron",
    "load_hf_weights",
    "megatron_to_hf",
    "merge_stages",
    "name_table",
    "stage_view",
]

Tensors = dict[str, torch.Tensor]


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


Layout = Literal["vocab", "replicated", "row", "qkv", "gate_up"]
"""How one Megatron tensor is made from its HF tensors (see the module docstring)."""


@dataclass(frozen=True)
class NameRule:
    """One row of the name map: a Megatron tensor, the HF tensors it is made of, how."""

    megatron: str
    hf: tuple[str, ...]
    layout: Layout


_MODEL_RULES = (
    NameRule("embedding.word_embeddings.weight", ("model.embed_tokens.weight",), "vocab"),
    NameRule("output_layer.weight", ("lm_head.weight",), "vocab"),  # untied models only
    NameRule("decoder.final_layernorm.weight", ("model.norm.weight",), "replicated"),
)
_QKV = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
_LAYER_RULES = (  # names after `decoder.layers.{i}.` / `model.layers.{i}.`
    NameRule("input_layernorm.weight", ("input_layernorm.weight",), "replicated"),
    NameRule("pre_mlp_layernorm.weight", ("post_attention_layernorm.weight",), "replicated"),
    NameRule("self_attention.linear_qkv.weight", tuple(f"{n}.weight" for n in _QKV), "qkv"),
    NameRule("self_attention.linear_qkv.bias", tuple(f"{n}.bias" for n in _QKV), "qkv"),
    NameRule("self_attention.linear_proj.weight", ("self_attn.o_proj.weight",), "row"),
    NameRule("mlp.linear_fc1.weight", ("mlp.gate_proj.weight", "mlp.up_proj.weight"), "gate_up"),
    NameRule("mlp.linear_fc2.weight", ("mlp.down_proj.weight",), "row"),
)
_REPLICATED = tuple(r.megatron for r in _MODEL_RULES + _LAYER_RULES if r.layout == "replicated")


def name_table(spec: ConvertSpec) -> list[NameRule]:
    """The name map of a model shaped like `spec`, whole-model names, in state-dict order: the
    one table both directions read (a tied model has no output layer, a model without qkv
    bias no `linear_qkv.bias`)."""
    table = [r for r in _MODEL_RULES if not (spec.tied and r.megatron == "output_layer.weight")]
    for i in range(spec.num_layers):
        table += [
            NameRule(
                f"decoder.layers.{i}.{r.megatron}",
                tuple(f"model.layers.{i}.{n}" for n in r.hf),
                r.layout,
            )
            for r in _LAYER_RULES
            if spec.qkv_bias or not r.megatron.endswith(".bias")
        ]
    return table


def _to_megatron(
    layout: Layout, hf: list[torch.Tensor], spec: ConvertSpec, tp_rank: int
) -> torch.Tensor:
    """Rank `tp_rank`'s Megatron tensor from its full HF tensors (inverse: `_to_hf`)."""
    tp = spec.tp_size
    if layout == "vocab":
        return _shard(_pad_vocab(hf[0], spec.padded_vocab), tp, tp_rank, 0)
    if layout == "replicated":
        return hf[0]
    if layout == "row":
        return _shard(hf[0], tp, tp_rank, 1)
    if layout == "qkv":
        q, k, v = hf
        return _shard(_interleave_qkv(q, k, v, spec), tp, tp_rank, 0)
    gate, up = (_shard(t, tp, tp_rank, 0) for t in hf)  # gate_up
    return torch.cat([gate, up], dim=0)


def _to_hf(layout: Layout, shards: list[torch.Tensor], spec: ConvertSpec) -> list[torch.Tensor]:
    """The full HF tensors from every rank's Megatron tensor (inverse of `_to_megatron`)."""
    if layout == "vocab":
        return [torch.cat(shards, dim=0)[: spec.vocab_size]]
    if layout == "replicated":
        return [shards[0]]
    if layout == "row":
        return [torch.cat(shards, dim=1)]
    if layout == "qkv":
        return list(_split_qkv(torch.cat(shards, dim=0), spec))
    halves = [s.chunk(2, dim=0) for s in shards]  # gate_up
    return [torch.cat([h[0] for h in halves], dim=0), torch.cat([h[1] for h in halves], dim=0)]


def hf_to_megatron(hf_sd: Mapping[str, torch.Tensor], spec: ConvertSpec, tp_rank: int) -> Tensors:
    """The Megatron parameters of tensor-parallel rank `tp_rank` from a full HF state dict."""
    return {
        rule.megatron: _to_megatron(rule.layout, [hf_sd[n] for n in rule.hf], spec, tp_rank)
        for rule in name_table(spec)
    }


def megatron_to_hf(shards: Sequence[Mapping[str, torch.Tensor]], spec: ConvertSpec) -> Tensors:
    """Full HF tensors from every tensor-parallel rank's Megatron dict (`shards[r]` is rank r).

    Replicated tensors are read from rank 0. Tied models yield no `lm_head.weight` (as HF saves
    them). Works equally for parameters and for their gradients.
    """
    if len(shards) != spec.tp_size:
        raise ValueError(f"expected {spec.tp_size} shards, got {len(shards)}")
    out: Tensors = {}
    for rule in name_table(spec):
        tensors = _to_hf(rule.layout, [s[rule.megatron] for s in shards], spec)
        out.update(zip(rule.hf, tensors, strict=True))
    return out


def _is_replicated(name: str) -> bool:
    return name.endswith(_REPLICATED)


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


def _gather_shards(
    local: Mapping[str, torch.Tensor], replicated: Callable[[str], bool] = _is_replicated
) -> list[Tensors]:
    """All-gather every sharded tensor over the tensor-parallel group: one dict per rank."""
    tp = parallel_state.get_tensor_model_parallel_world_size()
    if tp == 1:
        return [dict(local)]
    group = parallel_state.get_tensor_model_parallel_group()
    shards: list[Tensors] = [{} for _ in range(tp)]
    for name, tensor in local.items():
        if replicated(name):
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
    # adapters have no HF name: an export of full weights reads them folded in (`lora.merged`)
    local = {n: pick(p).detach() for n, p in model.named_parameters() if not is_adapter(n)}
    return megatron_to_hf(_gather_stages(_gather_shards(local), spec), spec)


def export_hf_weights(model: torch.nn.Module, spec: ConvertSpec) -> Tensors:
    """Full HF-named weights, gathered over tensor and pipeline parallel (collective: every
    rank of the model-parallel group calls)."""
    return _export(model, spec, lambda p: p)


_ADAPTER_REPLICATED: tuple[str, ...] = ("linear_qkv.lora_a", "linear_fc1.lora_a")
_ADAPTER_REPLICATED += ("linear_proj.lora_b", "linear_fc2.lora_b")


def export_hf_adapters(model: torch.nn.Module, spec: ConvertSpec) -> Tensors:
    """The adapters (`lora.add_adapters`) under PEFT's names, gathered over tensor and pipeline
    parallel (collective). A fused layer's B is split into its projections' rows as its weight
    is (q, k, v; gate, up), each projection sharing the layer's A; a row-parallel layer's A is
    gathered by columns as its weight is."""
    local = {n: p.detach() for n, p in model.named_parameters() if is_adapter(n)}
    shards = _gather_stages(_gather_shards(local, lambda n: n.endswith(_ADAPTER_REPLICATED)), spec)
    out: Tensors = {}
    for rule in name_table(spec):
        base = rule.megatron.removesuffix("weight")
        if not rule.megatron.endswith(".weight") or base + "lora_a" not in shards[0]:
            continue
        a = [s[base + "lora_a"] for s in shards]
        b = [s[base + "lora_b"] for s in shards]
        if rule.layout == "row":
            a_hf, b_hf = _to_hf("row", a, spec), [b[0]]
        else:  # qkv, gate_up: B split as the weight's rows, A shared
            b_hf = _to_hf(rule.layout, b, spec)
            a_hf = [a[0].clone() for _ in b_hf]  # one tensor each: files refuse shared memory
        for hf, a_one, b_one in zip(rule.hf, a_hf, b_hf, strict=True):
            module = PEFT_PREFIX + hf.removesuffix(".weight")
            out[f"{module}.lora_A.weight"] = a_one
            out[f"{module}.lora_B.weight"] = b_one
    return out


def _grad_of(p: torch.nn.Parameter) -> torch.Tensor:
    grad = getattr(p, "main_grad", None)  # Megatron DDP accumulates here
    if grad is None:
        grad = p.grad
    return torch.zeros_like(p) if grad is None else grad


def export_hf_grads(model: torch.nn.Module, spec: ConvertSpec) -> Tensors:
    """Gradients under full HF names, gathered over tensor and pipeline parallel (zeros where
    none; with tied embeddings and pp > 1, the first stage's embedding gradient)."""
    return _export(model, spec, _grad_of)
