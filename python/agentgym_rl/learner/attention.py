"""A fused core attention for Megatron's local GPT layer spec, on `F.scaled_dot_product_attention`.

Contract. `SdpaAttention` is a drop-in for Megatron's `DotProductAttention` (same constructor,
same `forward(query, key, value, attention_mask, attn_mask_type=..., ...)`, inputs
``[s, b, heads, head_dim]`` with ``num_query_groups`` key/value heads, output
``[s, b, heads * head_dim]`` of this tensor-parallel rank's heads). It computes the same
function as `DotProductAttention` with `softmax_scale` ``1 / sqrt(head_dim)`` and no dropout, but
never materialises the ``[b, heads, s, s]`` score matrix: PyTorch's fused kernel (flash
attention on CPU and GPU) runs the softmax blockwise, which is where Megatron's local path
loses to transformers on CPU.

Masks follow Transformer Engine's convention for `AttnMaskType.causal` (the self-attention of
GPT layers): the causal mask is implied and a passed `attention_mask` is not read, so batches
must be right-padded rows starting at position 0 (what `agentgym_rl.learner.model` checks and
`batch.collate` builds; padding sits after every real token, so no real query sees it). For
`AttnMaskType.padding`/`arbitrary` the boolean mask (True = may not attend, Megatron's sign) is
honoured. Grouped-query attention shares each key/value head with the consecutive query heads
of its group (`enable_gqa`), exactly Megatron's `repeat_interleave` layout.

`gpt_layer_spec(attention=...)` returns the local GPT layer spec with this module (``"sdpa"``)
or Megatron's own (``"local"``) as core attention.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.process_groups_config import ProcessGroupCollection
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import ModuleSpec
from megatron.core.transformer.transformer_config import TransformerConfig

__all__ = ["AttentionKind", "SdpaAttention", "gpt_layer_spec"]

AttentionKind = Literal["sdpa", "local"]


class SdpaAttention(MegatronModule):
    """Megatron core attention through `F.scaled_dot_product_attention` (see module docstring)."""

    def __init__(
        self,
        config: TransformerConfig,
        layer_number: int,
        attn_mask_type: AttnMaskType,
        attention_type: str,
        attention_dropout: float | None = None,
        softmax_scale: float | None = None,
        cp_comm_type: str | None = None,
        pg_collection: ProcessGroupCollection | None = None,
    ) -> None:
        super().__init__(config=config)
        del attention_type, cp_comm_type  # self-attention only; no context parallelism
        if config.context_parallel_size != 1:
            raise NotImplementedError("SdpaAttention does not support context parallelism")
        if config.softmax_type != "vanilla" or config.window_size is not None:
            raise NotImplementedError("SdpaAttention supports vanilla, full-window softmax only")
        if config.apply_query_key_layer_scaling:
            raise NotImplementedError(
                "SdpaAttention: apply_query_key_layer_scaling is not supported"
            )
        if pg_collection is None:
            pg_collection = ProcessGroupCollection.use_mpu_process_groups(required_pgs=["tp"])
        tp = pg_collection.tp.size()
        self.attn_mask_type = attn_mask_type
        self.heads = config.num_attention_heads // tp
        self.groups = config.num_query_groups // tp
        head_dim = config.kv_channels
        self.softmax_scale = (
            softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
        )
        # Dropout draws from the default generator (Megatron forks its tracker's state); the
        # supported HF families train without attention dropout.
        self.dropout_p = (
            config.attention_dropout if attention_dropout is None else attention_dropout
        )

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        attn_mask_type: AttnMaskType | None = None,
        attention_bias: torch.Tensor | None = None,
        packed_seq_params: object | None = None,
    ) -> torch.Tensor:
        """Queries [s, b, heads, d], keys/values [s, b, groups, d] -> [s, b, heads * d]."""
        if packed_seq_params is not None or attention_bias is not None:
            raise NotImplementedError("SdpaAttention: no packed (thd) sequences, no bias")
        mask_type = attn_mask_type or self.attn_mask_type
        causal = mask_type == AttnMaskType.causal
        mask = None
        if not causal and attention_mask is not None:
            mask = attention_mask.logical_not()  # SDPA: True = may attend
        # [s, b, h, d] -> [b, h, s, d], made contiguous: q, k and v are strided slices of the
        # fused qkv projection, and the kernel's blocks over s run faster on packed rows
        q, k, v = (t.permute(1, 2, 0, 3).contiguous() for t in (query, key, value))
        context = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=self.dropout_p if self.training else 0.0,
            is_causal=causal,
            scale=self.softmax_scale,
            enable_gqa=self.groups != self.heads,
        )
        # [b, h, s, d] -> [s, b, h * d]
        s, b = query.size(0), query.size(1)
        return context.permute(2, 0, 1, 3).reshape(s, b, -1)


def gpt_layer_spec(attention: AttentionKind = "sdpa") -> ModuleSpec:
    """Megatron's local GPT layer spec (RMSNorm) with the chosen core attention."""
    spec = get_gpt_layer_local_spec(normalization="RMSNorm")
    if attention == "sdpa":
        spec.submodules.self_attention.submodules.core_attention = SdpaAttention
    elif attention != "local":
        raise ValueError(f"attention must be 'sdpa' or 'local', got {attention!r}")
    return spec
