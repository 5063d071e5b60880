"""Learner training-step throughput: Megatron-core GPTModel vs plain transformers, same batch.

One Qwen2 (hidden 256, 4 layers, 4 heads / 2 kv heads, vocab 4096, tied embeddings) in both
stacks with identical weights; one step = forward at temperature 1, policy loss
(`losses.policy_loss`, GRPO-style advantages, TIS), backward, grad clip 1.0, AdamW step.
Prints padded tokens/s of each and the ratio (Megatron / transformers), single process.

    python benches/bench_learner.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from agentgym_rl.learner import convert
from agentgym_rl.learner import model as lm
from agentgym_rl.learner.losses import LossConfig, policy_loss


def hf_model(hidden: int, layers: int, vocab: int) -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        intermediate_size=hidden * 3,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(cfg).train()


def batch(vocab: int, rows: int, seq: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (rows, seq + 1), generator=gen)
    mask = (torch.arange(seq) % 4 != 0).float().expand(rows, seq).contiguous()
    adv = torch.randn(rows, 1, generator=gen).expand(rows, seq) * mask
    return {
        "input_ids": ids[:, :-1],
        "labels": ids[:, 1:],
        "position_ids": torch.arange(seq).expand(rows, seq),
        "loss_mask": mask,
        "advantages": adv,
        "behaviour": torch.full((rows, seq), -8.0) * mask,
    }


def step_fn(
    params: list[torch.nn.Parameter], logprobs: Callable[[], torch.Tensor], b: dict
) -> Callable[[], None]:
    opt = torch.optim.AdamW(params, lr=1e-5)
    cfg = LossConfig()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss, _ = policy_loss(
            cfg,
            logprobs=logprobs(),
            behaviour_logprobs=b["behaviour"],
            advantages=b["advantages"],
            loss_mask=b["loss_mask"],
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    return step


def timed(step: Callable[[], None], iters: int) -> float:
    step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    return (time.perf_counter() - t0) / iters


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    hidden, layers, vocab = 256, 4, 4096
    rows, seq, iters = (4, 128, 2) if args.quick else (8, 256, 5)
    hf = hf_model(hidden, layers, vocab)
    b = batch(vocab, rows, seq)

    lm.init_parallel(tp=1, pp=1, seed=0)
    mg = lm.build_gpt_model(hf.config)
    spec = convert.ConvertSpec.from_hf(hf.config, 1, mg.vocab_size)
    convert.load_hf_weights(mg, hf.state_dict(), spec)

    def mg_logprobs() -> torch.Tensor:
        return lm.token_logprobs(mg, b["input_ids"], b["position_ids"], b["labels"], 1.0)

    def hf_logprobs() -> torch.Tensor:
        logits = hf(input_ids=b["input_ids"]).logits.float()
        return torch.log_softmax(logits, dim=-1).gather(-1, b["labels"][..., None])[..., 0]

    with torch.no_grad():
        diff = (mg_logprobs() - hf_logprobs()).abs().max().item()
    tokens = rows * seq
    t_mg = timed(step_fn(list(mg.parameters()), mg_logprobs, b), iters)
    t_hf = timed(step_fn(list(hf.parameters()), hf_logprobs, b), iters)
    lm.shutdown_parallel()
    n_params = sum(p.numel() for p in hf.parameters())
    print(f"model: Qwen2 {n_params / 1e6:.1f}M params, batch {rows} x {seq} tokens, CPU")
    print(f"log-prob max |diff| megatron vs transformers before training: {diff:.2e}")
    print(f"megatron-core GPTModel : {tokens / t_mg:10.0f} tokens/s ({t_mg * 1e3:.0f} ms/step)")
    print(f"transformers Qwen2     : {tokens / t_hf:10.0f} tokens/s ({t_hf * 1e3:.0f} ms/step)")
    print(f"ratio megatron / transformers: {t_hf / t_mg:.2f}x")


if __name__ == "__main__":
    main()
