"""Non-zero LoRA adapters on a learner model, and the update they make on the wire (shared by
the engine-against-learner tests of the tiny model and of SmolLM2)."""

from __future__ import annotations

import torch

from agentgym_rl.learner import convert, lora


def adapted(
    model: torch.nn.Module, spec: convert.ConvertSpec, rank: int, alpha: float, scale: float
) -> dict[str, torch.Tensor]:
    """Add rank-`rank` adapters on attention and MLP, B drawn at `scale` (seeded; A as LoRA
    draws it), and return their update as the learner streams it (PEFT names, B scaled by
    alpha / rank)."""
    lora.add_adapters(model, rank, alpha, ["attention", "mlp"])
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".lora_b"):
                p.copy_(scale * torch.randn(p.shape, generator=gen))
    return {
        n: t * alpha / rank if n.endswith(".lora_B.weight") else t
        for n, t in convert.export_hf_adapters(model, spec).items()
    }
