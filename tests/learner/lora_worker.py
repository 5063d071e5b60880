"""torchrun worker for test_lora.py: the adapted tiny model under tensor parallel 2, over gloo.

`lora_case(tp, rank)` is also what the test runs in one process (tp 1): the same base weights
and the same full adapters, each rank given its share of them the way the base layer splits its
weight, so both sides compute one function. Rank 0 saves the log-probs and the adapters'
gradients gathered back to their full shapes; every rank writes its adapters' shards to one
distributed checkpoint (`adapter_checkpoint`), which the test loads under tensor parallel 1.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
from learner_fixtures import make_batch, tiny_hf_model
from megatron.core import dist_checkpointing, parallel_state

from agentgym_rl.learner import convert, cpu_support, lora
from agentgym_rl.learner import model as lm

VOCAB = 1000
TEMPERATURE = 0.7
RANK = 4


def full_adapters(model: torch.nn.Module, tp: int) -> dict[str, torch.Tensor]:
    """Seeded non-zero adapters at their full (tp 1) shapes, by parameter name."""
    gen = torch.Generator().manual_seed(7)
    out = {}
    for name, p in sorted(lora.adapter_state(model).items()):
        shape = list(p.shape)
        if name.endswith(".lora_b") and _split(name) == "out":
            shape[0] *= tp
        if name.endswith(".lora_a") and _split(name) == "in":
            shape[1] *= tp
        out[name] = 0.05 * torch.randn(*shape, generator=gen)
    return out


def _split(name: str) -> str:
    return "out" if any(k in name for k in ("linear_qkv", "linear_fc1")) else "in"


def share(name: str, full: torch.Tensor, tp: int, rank: int) -> torch.Tensor:
    """This rank's part of a full adapter, split as the base layer splits its weight."""
    if name.endswith(".lora_b") and _split(name) == "out":
        if "linear_fc1" in name:  # each rank holds [gate part; up part]
            gate, up = full.chunk(2, dim=0)
            return torch.cat([gate.chunk(tp)[rank], up.chunk(tp)[rank]])
        return full.chunk(tp, dim=0)[rank]
    if name.endswith(".lora_a") and _split(name) == "in":
        return full.chunk(tp, dim=1)[rank]
    return full


def gather(name: str, part: torch.Tensor, tp: int) -> torch.Tensor:
    """`share`'s inverse over the tensor-parallel group."""
    sharded = (name.endswith(".lora_b") and _split(name) == "out") or (
        name.endswith(".lora_a") and _split(name) == "in"
    )
    if tp == 1 or not sharded:
        return part
    parts = [torch.empty_like(part) for _ in range(tp)]
    torch.distributed.all_gather(
        parts, part.contiguous(), group=parallel_state.get_tensor_model_parallel_group()
    )
    if name.endswith(".lora_a"):
        return torch.cat(parts, dim=1)
    if "linear_fc1" in name:
        halves = [p.chunk(2, dim=0) for p in parts]
        return torch.cat([h[0] for h in halves] + [h[1] for h in halves])
    return torch.cat(parts, dim=0)


def lora_case(tp: int, rank: int) -> dict[str, Any]:
    hf = tiny_hf_model("qwen2", vocab=VOCAB, heads=4, kv_heads=2, head_dim=32)
    model = lm.build_gpt_model(hf.config)
    spec = convert.ConvertSpec.from_hf(hf.config, tp, model.vocab_size)
    convert.load_hf_weights(model, hf.state_dict(), spec)
    lora.add_adapters(model, RANK, 8.0, ["attention", "mlp"])
    full = full_adapters(model, tp)
    lora.load_adapter_state(model, {n: share(n, t, tp, rank) for n, t in full.items()})
    ids, pos, labels = make_batch(VOCAB, batch=2, seq=12)
    logprobs = lm.token_logprobs(model, ids, pos, labels, TEMPERATURE, vocab_size=VOCAB)
    (-logprobs.mean()).backward()
    grads = {
        n: gather(n, p.grad, tp)
        for n, p in model.named_parameters()
        if n.endswith(lora.ADAPTER_SUFFIXES)
    }
    peft = convert.export_hf_adapters(model, spec)
    return {"logprobs": logprobs.detach(), "grads": grads, "peft": peft, "model": model}


def adapter_checkpoint(model: torch.nn.Module) -> dict[str, Any]:
    """The adapters' sharded state dict, as the learner's checkpoints hold them."""
    return {k: v for k, v in model.sharded_state_dict().items() if lora.is_adapter(k)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--ckpt", required=True)
    args = parser.parse_args()
    layout = lm.init_parallel(tp=2, seed=0)
    case = lora_case(2, parallel_state.get_tensor_model_parallel_rank())
    model = case.pop("model")
    Path(args.ckpt).mkdir(exist_ok=True)
    with cpu_support.host_checkpointing():
        dist_checkpointing.save(adapter_checkpoint(model), args.ckpt)
    if layout.rank == 0:
        torch.save(case, args.out)
    lm.shutdown_parallel()


if __name__ == "__main__":
    main()
