"""Megatron-core `GPTModel`s for HF Qwen2 and Llama configs, parallel setup, and token log-probs.

Contract:
- `init_parallel` brings up torch.distributed (gloo on CPU; a private single-process store when
  not launched by torchrun) and Megatron's `parallel_state` with tp/pp sizes (dp is what is
  left of the world), installs the CPU substitutions of `cpu_support` when there is no CUDA,
  and seeds Megatron's RNG tracker. `shutdown_parallel` undoes all of it.
- `transformer_config_from_hf` maps a `Qwen2Config`/`LlamaConfig` to a `TransformerConfig`;
  `build_gpt_model` builds the matching `PolicyGPTModel` (a `GPTModel`) with the local
  (Transformer-Engine-free) layer spec. The vocabulary is padded to a multiple of
  `vocab_multiple * tp`.
  `attention="sdpa"` (default) plugs the fused `attention.SdpaAttention` into the spec,
  `"local"` keeps Megatron's `DotProductAttention` (same function, materialised scores).
  `fused_swiglu=True` (default) uses Megatron's fused SwiGLU kernel (`bias_activation_fusion`).
- `token_logprobs` gives log p(label) at a temperature; padded vocabulary columns are
  excluded, so the result is the log-prob of the HF model's distribution at that temperature
  (vLLM's "processed_logprobs" when only a temperature is applied: no top-k/top-p). With
  tp > 1 it runs through Megatron's vocab-parallel cross-entropy (each rank touches only its
  vocabulary shard); with tp == 1 through one fused `log_softmax` + gather over the unpadded
  columns (`fused=False` forces the vocab-parallel path there too, for tests). Either way the
  log-probs are read from the output layer's ``[s, b, v]`` logits inside the forward
  (`PolicyGPTModel.token_head`), skipping Megatron's transposed copy of the logits. With
  `positions` (the loss mask) only those positions reach the output layer
  (`PolicyGPTModel.head_rows`); the log-probs elsewhere are 0.
- `token_logprobs_and_entropy` also returns the per-token entropy of that same distribution
  (tp > 1: `vocab_parallel_entropy`, max, sum-exp and sum(p * logit) reduced over the
  tensor-parallel group, padded columns excluded; tp == 1: from the same log-softmax),
  differentiable and identical on every tensor-parallel rank.

Megatron's RoPE ignores `position_ids` (it rotates by index 0..S-1), so batches must be
right-padded rows starting at position 0; `token_logprobs` checks this.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from megatron.core import parallel_state, tensor_parallel
from megatron.core.models.gpt import GPTModel
from megatron.core.tensor_parallel import random as mcore_random
from megatron.core.transformer import TransformerConfig
from transformers import PretrainedConfig

from agentgym_rl.learner import cpu_support
from agentgym_rl.learner.attention import AttentionKind, gpt_layer_spec

__all__ = [
    "SUPPORTED_MODEL_TYPES",
    "ParallelLayout",
    "PolicyGPTModel",
    "build_gpt_model",
    "causal_mask",
    "head_dim_of",
    "init_parallel",
    "padded_vocab_size",
    "per_token_loss",
    "qkv_bias_of",
    "shutdown_parallel",
    "stage_hidden",
    "token_logprobs",
    "token_logprobs_and_entropy",
    "transformer_config_from_hf",
    "vocab_parallel_entropy",
]

SUPPORTED_MODEL_TYPES: tuple[str, ...] = ("qwen2", "llama")


@dataclass(frozen=True)
class ParallelLayout:
    """This process's place in the tensor/pipeline/data-parallel grid."""

    world_size: int
    rank: int
    tp_size: int
    tp_rank: int
    pp_size: int
    pp_rank: int
    dp_size: int
    dp_rank: int


def _current_layout() -> ParallelLayout:
    ps = parallel_state
    return ParallelLayout(
        world_size=torch.distributed.get_world_size(),
        rank=torch.distributed.get_rank(),
        tp_size=ps.get_tensor_model_parallel_world_size(),
        tp_rank=ps.get_tensor_model_parallel_rank(),
        pp_size=ps.get_pipeline_model_parallel_world_size(),
        pp_rank=ps.get_pipeline_model_parallel_rank(),
        dp_size=ps.get_data_parallel_world_size(),
        dp_rank=ps.get_data_parallel_rank(),
    )


def init_parallel(tp: int = 1, pp: int = 1, *, seed: int = 0) -> ParallelLayout:
    """Initialise torch.distributed and Megatron parallel state; returns the layout.

    Under torchrun (RANK/WORLD_SIZE set) the env:// rendezvous is used; otherwise a single
    process joins a private in-memory store, so no port is needed. The backend is nccl with
    CUDA and gloo without. `world_size` must be a multiple of `tp * pp`.
    """
    dist = torch.distributed
    use_cuda = not cpu_support.cpu_mode()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        backend = "nccl" if use_cuda else "gloo"
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            dist.init_process_group(backend, init_method="env://")
        else:
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    world = dist.get_world_size()
    if world % (tp * pp) != 0:
        raise ValueError(f"world size {world} is not a multiple of tp*pp = {tp * pp}")
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp
        )
    current = _current_layout()
    if (current.tp_size, current.pp_size) != (tp, pp):
        raise RuntimeError(
            f"parallel state already set up with tp={current.tp_size}, pp={current.pp_size}; "
            "call shutdown_parallel(keep_process_group=True) first"
        )
    cpu_support.install_cpu_runtime()
    tensor_parallel.model_parallel_cuda_manual_seed(seed)
    return current


def shutdown_parallel(*, keep_process_group: bool = False) -> None:
    """Tear down Megatron parallel state and the RNG tracker, then the default process group.

    With `keep_process_group`, torch.distributed stays up so `init_parallel` can regroup the
    same processes with other tp/pp sizes.
    """
    parallel_state.destroy_model_parallel()
    mcore_random.initialize_rng_tracker(force_reset=True)
    if not keep_process_group and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def padded_vocab_size(vocab_size: int, tp: int, vocab_multiple: int = 1) -> int:
    """`vocab_size` rounded up to a multiple of `vocab_multiple * tp` (the vocab-parallel split)."""
    step = vocab_multiple * tp
    return -(-vocab_size // step) * step


def _rope_theta(hf: PretrainedConfig) -> float:
    rope = getattr(hf, "rope_parameters", None) or {}
    rope_type = rope.get("rope_type", "default")
    if rope_type != "default":
        raise NotImplementedError(f"rope_type {rope_type!r} is not supported (only 'default')")
    theta = rope.get("rope_theta", getattr(hf, "rope_theta", None))
    if theta is None:
        raise ValueError("config has no rope_theta")
    return float(theta)


def qkv_bias_of(hf: PretrainedConfig) -> bool:
    """Whether q/k/v projections carry a bias; rejects bias layouts Megatron cannot express."""
    if hf.model_type == "qwen2":
        if getattr(hf, "use_sliding_window", False):
            raise NotImplementedError("Qwen2 sliding-window attention is not supported")
        return True
    if hf.model_type == "llama":
        # Llama's attention_bias also puts a bias on o_proj and mlp_bias on the MLP; Megatron's
        # add_bias_linear would add both together, so only the bias-free variant maps exactly.
        if getattr(hf, "attention_bias", False) or getattr(hf, "mlp_bias", False):
            raise NotImplementedError("Llama with attention_bias/mlp_bias is not supported")
        return False
    raise NotImplementedError(f"model_type {hf.model_type!r}; supported: {SUPPORTED_MODEL_TYPES}")


def head_dim_of(hf: PretrainedConfig) -> int:
    """Per-head dimension: `head_dim` when set, else hidden / heads."""
    head_dim = getattr(hf, "head_dim", None)
    return int(head_dim) if head_dim else hf.hidden_size // hf.num_attention_heads


def transformer_config_from_hf(
    hf: PretrainedConfig,
    *,
    tp: int = 1,
    pp: int = 1,
    params_dtype: torch.dtype = torch.float32,
    fused_swiglu: bool = True,
) -> TransformerConfig:
    """The `TransformerConfig` of a Qwen2 or Llama config (RMSNorm, SwiGLU, GQA, no dropout).

    `fused_swiglu` turns on Megatron's own fused SwiGLU (`bias_activation_fusion`, on by default
    in Megatron-LM): one compiled elementwise kernel each way instead of chunk, silu, multiply
    and, in the backward, a concatenation of the two halves' gradients. Same function; on CPU it
    needs a C++ compiler (torch.compile's inductor), and compiles once per process."""
    if hf.hidden_act != "silu":
        raise NotImplementedError(f"hidden_act {hf.hidden_act!r} (only silu/SwiGLU)")
    return TransformerConfig(
        num_layers=hf.num_hidden_layers,
        hidden_size=hf.hidden_size,
        num_attention_heads=hf.num_attention_heads,
        num_query_groups=hf.num_key_value_heads or hf.num_attention_heads,
        kv_channels=head_dim_of(hf),
        ffn_hidden_size=hf.intermediate_size,
        normalization="RMSNorm",
        layernorm_epsilon=hf.rms_norm_eps,
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=qkv_bias_of(hf),
        hidden_dropout=0.0,
        attention_dropout=float(getattr(hf, "attention_dropout", 0.0)),
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        # what one stage sends the next (`pipeline.py` always sends fp32)
        pipeline_dtype=torch.float32 if pp > 1 else None,
        params_dtype=params_dtype,
        bf16=params_dtype == torch.bfloat16,
        fp16=params_dtype == torch.float16,
        bias_activation_fusion=fused_swiglu,
        # On CPU parameters must start there; on GPU Megatron creates them on the device.
        # The other kernel fusions keep Megatron's defaults (off): they need CUDA.
        use_cpu_initialization=cpu_support.cpu_mode(),
    )


def build_gpt_model(
    hf: PretrainedConfig,
    *,
    params_dtype: torch.dtype = torch.float32,
    vocab_multiple: int = 1,
    attention: AttentionKind = "sdpa",
    fused_swiglu: bool = True,
) -> GPTModel:
    """A randomly initialised `PolicyGPTModel` shaped like `hf` for the current layout.

    Call after `init_parallel`. Load weights with `convert.load_hf_weights`. On CPU the model's
    rotary embedding gets the `cpu_support` substitution. The HF vocabulary size is kept as
    `model.unpadded_vocab_size`; `model.vocab_size` is the padded one.
    """
    tp = parallel_state.get_tensor_model_parallel_world_size()
    pp = parallel_state.get_pipeline_model_parallel_world_size()
    config = transformer_config_from_hf(
        hf, tp=tp, pp=pp, params_dtype=params_dtype, fused_swiglu=fused_swiglu
    )
    with cpu_support.host_construction():
        model = PolicyGPTModel(
            config=config,
            transformer_layer_spec=gpt_layer_spec(attention),
            vocab_size=padded_vocab_size(hf.vocab_size, tp, vocab_multiple),
            max_sequence_length=hf.max_position_embeddings,
            pre_process=parallel_state.is_pipeline_first_stage(),
            post_process=parallel_state.is_pipeline_last_stage(),
            share_embeddings_and_output_weights=bool(hf.tie_word_embeddings),
            position_embedding_type="rope",
            rotary_base=_rope_theta(hf),
            rotary_percent=1.0,
            parallel_output=True,
        )
    model.unpadded_vocab_size = hf.vocab_size  # read by token_logprobs to mask the padding
    if not cpu_support.cpu_mode():
        # Megatron makes its parallel layers on the GPU, but its Torch fallbacks (the RMSNorm
        # where neither Apex nor Transformer Engine is installed) on the default device, the
        # host: the first forward on an H200 failed there. Megatron's own `get_model` moves the
        # whole model likewise.
        model.cuda(torch.cuda.current_device())
    return cpu_support.adapt_model_for_cpu(model)


def causal_mask(seq_len: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Megatron's boolean attention mask [1, 1, S, S]: True where a query may NOT attend.

    Passed explicitly because Megatron's own default builds its mask on "cuda".
    """
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)[None, None]


def _check_positions(position_ids: torch.Tensor, seq_len: int) -> None:
    expected = torch.arange(seq_len, device=position_ids.device)
    if not bool((position_ids == expected).all()):
        raise ValueError(
            "Megatron's RoPE rotates by token index: position_ids must be 0..S-1 on every row "
            "(right-pad the batch)"
        )


def _mask_padded_vocab(logits: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Set this rank's columns at or beyond `vocab_size` (vocab padding) to -inf."""
    local = logits.size(-1)
    start = parallel_state.get_tensor_model_parallel_rank() * local
    if start + local <= vocab_size:
        return logits
    column = torch.arange(start, start + local, device=logits.device)
    return logits.masked_fill(column >= vocab_size, float("-inf"))


def _use_fused(fused: bool) -> bool:
    """The one-rank fused path applies when asked for and the vocabulary is not split."""
    return fused and parallel_state.get_tensor_model_parallel_world_size() == 1


TokenHead = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, ...]]
"""Per-token quantities from logits ``[s, b, V / tp]`` and labels ``[s, b]``, each ``[s, b]``."""


class PolicyGPTModel(GPTModel):
    """`GPTModel` whose ``labels=`` path can run a per-token head on the ``[s, b, v]`` logits.

    Without labels, Megatron transposes the logits to ``[b, s, v]`` with a full copy (and its
    backward another): the two largest copies of a step at a small hidden size. With labels it
    hands the output layer's ``[s, b, v]`` logits to `compute_language_model_loss`;
    `token_logprobs` sets `token_head` for one forward so log-probs are read in that layout.
    With no head set, the method is Megatron's cross-entropy (`per_token_loss`).
    """

    token_head: TokenHead | None = None
    head_rows: torch.Tensor | None = None
    """``[s, b]`` bool: the positions whose logits the head needs (None: all of them)."""

    def _postprocess(self, hidden_states: torch.Tensor, **kwargs: Any) -> Any:
        rows, labels = self.head_rows, kwargs.get("labels")
        if rows is None or labels is None or not self.post_process:
            return super()._postprocess(hidden_states=hidden_states, **kwargs)
        # the vocabulary projection is the widest matrix of a small model: only the selected
        # positions reach it, as one sequence of n ([n, 1, h]; labels [1, n])
        kwargs["labels"] = labels.transpose(0, 1)[rows].unsqueeze(0)
        return super()._postprocess(hidden_states=hidden_states[rows].unsqueeze(1), **kwargs)

    def compute_language_model_loss(self, labels: torch.Tensor, logits: torch.Tensor) -> Any:
        if self.token_head is None:
            return super().compute_language_model_loss(labels, logits)
        # the head is fp32 work (log-softmax, loss): never under the forward's autocast
        with torch.autocast(logits.device.type, enabled=False):
            return self.token_head(logits, labels.transpose(0, 1).contiguous())


def _forward_setup(
    input_ids: torch.Tensor, position_ids: torch.Tensor, autocast: torch.dtype | None
) -> tuple[torch.Tensor, contextlib.AbstractContextManager[Any]]:
    """The causal mask of a right-padded batch (positions checked) and the forward's autocast
    context (a null one without `autocast`)."""
    seq_len = input_ids.size(1)
    _check_positions(position_ids, seq_len)
    mask = causal_mask(seq_len, input_ids.device)
    if autocast is None:
        return mask, contextlib.nullcontext()
    return mask, torch.autocast(device_type=input_ids.device.type, dtype=autocast)


def _run_head(
    model: GPTModel,
    input_ids: torch.Tensor,
    position_ids: torch.Tensor,
    labels: torch.Tensor,
    head: TokenHead,
    autocast: torch.dtype | None,
    positions: torch.Tensor | None = None,
) -> tuple[torch.Tensor, ...]:
    """One forward with `head` applied to its logits; results ``[B, S]``. With `autocast`
    only the model's layers run under autocast; the head is always fp32. With `positions`
    (``[B, S]`` bool) a `PolicyGPTModel` projects only those positions onto the vocabulary;
    the results are 0 elsewhere."""
    mask, ctx = _forward_setup(input_ids, position_ids, autocast)
    if not isinstance(model, PolicyGPTModel):  # a plain GPTModel: [b, s, v] seen as [s, b, v]
        with ctx:
            logits = model(input_ids, position_ids, mask)
        out = head(logits.transpose(0, 1), labels.transpose(0, 1).contiguous())
        return tuple(_outside(t.transpose(0, 1), positions) for t in out)
    rows = None if positions is None else positions.transpose(0, 1)
    model.token_head, model.head_rows = head, rows
    try:
        with ctx:
            out = model(input_ids, position_ids, mask, labels=labels)
    finally:
        model.token_head, model.head_rows = None, None
    if rows is None:
        return tuple(t.transpose(0, 1).contiguous() for t in out)
    return tuple(_scatter_rows(t[:, 0], rows) for t in out)


def _scatter_rows(values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``[n]`` values of the selected ``[s, b]`` rows back into a ``[b, s]`` grid, 0 elsewhere."""
    full = values.new_zeros(rows.shape).masked_scatter(rows, values)
    return full.transpose(0, 1).contiguous()


def _outside(t: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    """`t` ``[B, S]`` with 0 outside `positions` (the selected path's convention)."""
    t = t.contiguous()
    return t if positions is None else torch.where(positions, t, torch.zeros_like(t))


def _sampling_logits(
    logits: torch.Tensor, temperature: float, vocab_size: int | None, *, fused: bool
) -> torch.Tensor:
    """This rank's vocabulary shard of `logits` / temperature, fp32.

    Fused (one rank): the unpadded columns only (a view when nothing is to be done). Otherwise
    a fresh tensor (the vocab-parallel CE works in place) with padded columns at -inf.
    """
    if fused:
        if vocab_size is not None and vocab_size < logits.size(-1):
            logits = logits[..., :vocab_size]
        logits = logits.float()
        # at T = 1 the division would be one more full pass over the logits for nothing
        return logits if temperature == 1.0 else logits / temperature
    logits = logits.float() / temperature  # a fresh tensor
    if vocab_size is not None:
        logits = _mask_padded_vocab(logits, vocab_size)
    return logits


def _logprob_head(
    model: GPTModel,
    temperature: float,
    vocab_size: int | None,
    *,
    fused: bool,
    entropy: bool,
    entropy_grad: bool = True,
) -> TokenHead:
    """Log-probs of the labels (and entropies) at `temperature` over the unpadded vocabulary;
    without `entropy_grad` the entropies are computed outside autograd (nothing of the
    vocabulary-wide product kept for a backward that never uses it)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if vocab_size is None:
        vocab_size = getattr(model, "unpadded_vocab_size", None)

    def head(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z = _sampling_logits(logits, temperature, vocab_size, fused=fused)
        grad = torch.enable_grad() if entropy_grad else torch.no_grad()
        if fused:
            logp = torch.log_softmax(z, dim=-1)
            lp = _gather_labels(logp, labels)
            if not entropy:
                return (lp,)
            with grad:
                return lp, -(logp.exp() * logp).sum(dim=-1)
        if not entropy:
            return (-tensor_parallel.vocab_parallel_cross_entropy(z, labels),)
        with grad:
            h = vocab_parallel_entropy(z)
        # the CE modifies its input in place; the entropy's graph still needs `z`
        return -tensor_parallel.vocab_parallel_cross_entropy(z.clone(), labels), h

    return head


def vocab_parallel_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax over the full vocabulary from this rank's shard `logits` [..., V/tp].

    ``H = logsumexp(z) - sum(p * z)``, computed as ``log(s) - t / s`` with ``m`` the global
    max, ``s = sum exp(z - m)`` and ``t = sum exp(z - m) * (z - m)``; ``m`` is all-reduced (MAX,
    no gradient: H does not depend on it) and ``s``, ``t`` summed over the tensor-parallel group
    (autograd-aware: the backward of the sum is the identity on each rank's partial). Columns at
    -inf (vocabulary padding) contribute nothing. Returns ``[...]`` fp32, the same on every rank.
    """
    logits = logits.float()
    tp = parallel_state.get_tensor_model_parallel_world_size()
    group = parallel_state.get_tensor_model_parallel_group()
    with torch.no_grad():
        m = logits.max(dim=-1, keepdim=True).values
        if tp > 1:
            torch.distributed.all_reduce(m, op=torch.distributed.ReduceOp.MAX, group=group)
    finite = torch.isfinite(logits)
    # masked_fill keeps -inf out of the graph: no 0 * inf = nan in forward or backward.
    z = (logits - m).masked_fill(~finite, 0.0)
    e = torch.exp(z) * finite.to(z.dtype)
    st = torch.stack([e.sum(dim=-1), (e * z).sum(dim=-1)])
    if tp > 1:
        st = tensor_parallel.reduce_from_tensor_model_parallel_region(st, group=group)
    s, t = st[0], st[1]
    return torch.log(s) - t / s


def _gather_labels(logp: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def token_logprobs(
    model: GPTModel,
    input_ids: torch.Tensor,
    position_ids: torch.Tensor,
    labels: torch.Tensor,
    temperature: float = 1.0,
    *,
    vocab_size: int | None = None,
    fused: bool = True,
    autocast: torch.dtype | None = None,
    positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """log softmax(logits / temperature)[label] per token, [B, S] fp32, differentiable.

    `labels[b, s]` is the token whose log-prob is read at position s (usually
    `input_ids[b, s + 1]`; at padding, any id in the vocabulary: mask the result there).
    `vocab_size` is the unpadded vocabulary (default: the `unpadded_vocab_size` that
    `build_gpt_model` records on the model); columns past it are excluded from the softmax.
    With tensor parallelism (or `fused=False`) the softmax runs through Megatron's
    vocab-parallel cross-entropy, so each rank only touches its own vocabulary shard; every
    tensor-parallel rank returns the same values. `autocast` (e.g. ``torch.bfloat16``) runs the
    model's forward under autocast; the log-softmax stays fp32. `positions` (``[B, S]`` bool,
    e.g. the loss mask) limits the vocabulary projection to those positions: the result is 0
    elsewhere, and a step whose loss covers a tenth of its tokens skips most of the head.
    """
    head = _logprob_head(model, temperature, vocab_size, fused=_use_fused(fused), entropy=False)
    (logprobs,) = _run_head(model, input_ids, position_ids, labels, head, autocast, positions)
    return logprobs


def token_logprobs_and_entropy(
    model: GPTModel,
    input_ids: torch.Tensor,
    position_ids: torch.Tensor,
    labels: torch.Tensor,
    temperature: float = 1.0,
    *,
    vocab_size: int | None = None,
    fused: bool = True,
    autocast: torch.dtype | None = None,
    positions: torch.Tensor | None = None,
    entropy_grad: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`token_logprobs` and the per-token entropy of softmax(logits / temperature), one forward.

    Both are [B, S] fp32 and the same on every tensor-parallel rank, the log-probs
    differentiable and the entropy too unless `entropy_grad` is False (logged, not trained on);
    the entropy excludes padded vocabulary columns (see `vocab_parallel_entropy`).
    """
    head = _logprob_head(
        model,
        temperature,
        vocab_size,
        fused=_use_fused(fused),
        entropy=True,
        entropy_grad=entropy_grad,
    )
    logprobs, entropy = _run_head(model, input_ids, position_ids, labels, head, autocast, positions)
    return logprobs, entropy


def stage_hidden(
    model: GPTModel,
    input_ids: torch.Tensor,
    position_ids: torch.Tensor,
    *,
    autocast: torch.dtype | None = None,
) -> torch.Tensor:
    """The output hidden states ``[s, b, h]`` of a pipeline stage before the last (its input
    comes from the previous stage through `model.set_input_tensor`, or from `input_ids` on the
    first stage)."""
    mask, ctx = _forward_setup(input_ids, position_ids, autocast)
    with ctx:
        hidden: torch.Tensor = model(input_ids, position_ids, mask)
    return hidden


def per_token_loss(
    model: GPTModel,
    input_ids: torch.Tensor,
    position_ids: torch.Tensor,
    labels: torch.Tensor,
) -> torch.Tensor:
    """Megatron's own per-token cross-entropy [B, S] (`labels=` path of `GPTModel.forward`).

    It normalises over the padded vocabulary, so it equals `-token_logprobs` only when the
    vocabulary needs no padding.
    """
    seq_len = input_ids.size(1)
    _check_positions(position_ids, seq_len)
    mask = causal_mask(seq_len, input_ids.device)
    loss: torch.Tensor = model(input_ids, position_ids, mask, labels=labels)
    return loss
