"""torchrun worker for test_parallel.py: tensor parallel 2, then data parallel 2, over gloo.

Run as `torchrun --nproc_per_node 2 parallel_worker.py --out results.pt`. Rank 0 saves
`{"tp": {family: case}, "dp": case}`, where a case holds per-token losses/log-probs/entropies
and gradients under full HF names. `compute_case` is also what the test runs in one process for
the reference, so both sides execute the same code.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from learner_fixtures import FAMILIES, make_batch, tiny_hf_model
from megatron.core import parallel_state

from agentgym_rl.learner import convert
from agentgym_rl.learner import model as lm

TEMPERATURE = 0.7
VOCAB = {"qwen2": 1000, "llama": 1001}
"""Llama's odd vocabulary gets one padded column under tp 2 (masked by token_logprobs)."""
ENTROPY_COEF = 0.1


def compute_case(family: str, batch: int, rows: slice) -> dict[str, Any]:
    """Build the tiny model for the current layout, run `rows` of the batch, backprop.

    qwen2 (tied): Megatron's `labels=` per-token loss, gradient of its mean.
    llama (untied, padded vocabulary): gradient of -mean(token_logprobs + ENTROPY_COEF *
    entropy at TEMPERATURE), so the vocab-parallel entropy's backward is covered too.
    """
    hf = tiny_hf_model(family, vocab=VOCAB[family], heads=4, kv_heads=2, head_dim=32)
    tp = parallel_state.get_tensor_model_parallel_world_size()
    model = lm.build_gpt_model(hf.config)
    spec = convert.ConvertSpec.from_hf(hf.config, tp, model.vocab_size)
    convert.load_hf_weights(model, hf.state_dict(), spec)
    ids, pos, labels = (t[rows] for t in make_batch(VOCAB[family], batch=batch, seq=12))
    logprobs, entropy = lm.token_logprobs_and_entropy(
        model, ids, pos, labels, TEMPERATURE, vocab_size=VOCAB[family]
    )
    if family == "qwen2":
        loss = lm.per_token_loss(model, ids, pos, labels)
        loss.mean().backward()
    else:
        loss = -logprobs - ENTROPY_COEF * entropy
        loss.mean().backward()
    grads = convert.export_hf_grads(model, spec)
    return {
        "loss": loss.detach().cpu(),
        "logprobs": logprobs.detach().cpu(),
        "entropy": entropy.detach().cpu(),
        "grads": {name: grad.cpu() for name, grad in grads.items()},
    }


def _data_parallel_case() -> dict[str, Any]:
    """Each dp rank takes half of a batch of 4; gradients averaged, losses gathered."""
    dp = parallel_state.get_data_parallel_world_size()
    rank = parallel_state.get_data_parallel_rank()
    group = parallel_state.get_data_parallel_group()
    half = 4 // dp
    case = compute_case("qwen2", batch=4, rows=slice(rank * half, (rank + 1) * half))
    for grad in case["grads"].values():
        torch.distributed.all_reduce(grad, group=group)
        grad /= dp
    for key in ("loss", "logprobs", "entropy"):
        parts = [torch.empty_like(case[key]) for _ in range(dp)]
        torch.distributed.all_gather(parts, case[key], group=group)
        case[key] = torch.cat(parts)
    return case


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    layout = lm.init_parallel(tp=2, seed=0)
    assert (layout.tp_size, layout.dp_size) == (2, 1), layout
    results: dict[str, Any] = {"tp": {f: compute_case(f, 2, slice(None)) for f in FAMILIES}}
    lm.shutdown_parallel(keep_process_group=True)

    layout = lm.init_parallel(tp=1, seed=0)
    assert (layout.tp_size, layout.dp_size) == (1, 2), layout
    results["dp"] = _data_parallel_case()
    if layout.rank == 0:
        torch.save(results, args.out)
    lm.shutdown_parallel()


if __name__ == "__main__":
    main()
