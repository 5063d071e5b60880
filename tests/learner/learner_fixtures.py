"""Tiny HF models and batches shared by the learner tests and the torchrun worker.

Everything is seeded, so the pytest process and every torchrun rank build identical weights.
Models and batches live on `DEVICE` (CUDA when present: Megatron then builds on the GPU).
Biases and norm weights get noise on top of HF's init (zeros and ones), so a conversion that
mixes them up cannot pass by accident.
"""

from __future__ import annotations

import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    Qwen2Config,
    Qwen2ForCausalLM,
)

FAMILIES = ("qwen2", "llama")
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def tiny_hf_model(
    family: str,
    *,
    vocab: int = 1000,
    heads: int = 2,
    kv_heads: int = 1,
    head_dim: int = 64,
    hidden: int = 128,
    layers: int = 2,
    ffn: int = 256,
    seed: int = 0,
) -> PreTrainedModel:
    """A random fp32 Qwen2 (tied embeddings, qkv bias) or Llama (untied, no bias) in eval mode."""
    common = dict(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=ffn,
        max_position_embeddings=256,
        rope_theta=5000.0,
        rms_norm_eps=1e-5,
    )
    torch.manual_seed(seed)
    if family == "qwen2":
        model: PreTrainedModel = Qwen2ForCausalLM(Qwen2Config(tie_word_embeddings=True, **common))
    elif family == "llama":
        model = LlamaForCausalLM(LlamaConfig(tie_word_embeddings=False, **common))
    else:
        raise ValueError(family)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                param.add_(0.1 * torch.randn_like(param))
    return model.to(DEVICE).eval()


def saved_hf_weights(hf: torch.nn.Module) -> dict[str, torch.Tensor]:
    """HF state dict as saved: a tied model has no separate lm_head."""
    sd = dict(hf.state_dict())
    if hf.config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    return sd


def make_batch(
    vocab: int, batch: int = 2, seq: int = 16, seed: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, position_ids, labels) [B, S]; labels are the next tokens."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (batch, seq + 1), generator=gen)
    positions = torch.arange(seq).expand(batch, seq)
    tokens, positions = tokens.to(DEVICE), positions.to(DEVICE)
    return tokens[:, :-1], positions, tokens[:, 1:]


def hf_token_logprobs(
    model: PreTrainedModel, input_ids: torch.Tensor, labels: torch.Tensor, temperature: float
) -> torch.Tensor:
    """The reference: log softmax(HF logits / T)[label], [B, S]."""
    logits = model(input_ids=input_ids).logits.float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, labels[..., None])[..., 0]
