"""Learner training-step throughput: Megatron-core GPTModel vs plain transformers, same batch.

One Qwen2 (hidden 256, 4 layers, 4 heads / 2 kv heads, vocab 4096, tied embeddings) in both
stacks with identical weights; one step = forward at temperature 1, policy loss
(`losses.policy_loss`, GRPO-style advantages, TIS), backward, grad clip 1.0, AdamW step.
Prints padded tokens/s of each and the ratio (Megatron / transformers), single process.

The learner's path is the fused one (`SdpaAttention` core attention, Megatron's fused SwiGLU,
one log-softmax + gather for the log-probs at tp = 1); `--ablation` adds two rows: the same
without the SwiGLU fusion, and Megatron's unfused local path (`DotProductAttention`,
vocab-parallel cross-entropy, unfused SwiGLU). The first step of each stack is an untimed
warm-up (it also compiles the fused SwiGLU). Steps of the stacks are
interleaved (one of each per round) and the median per-step time is reported, so load from
other processes on a shared machine hits every stack alike. On a busy machine wall time still
swings by tens of percent between rounds; `--threads 1 --cpu-time` times this process's CPU
seconds on one thread instead, which other processes barely move.

    python benches/bench_learner.py [--quick] [--iters N] [--ablation] [--threads N] [--cpu-time]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from agentgym_rl.config.learn import LossConfig
from agentgym_rl.learner import convert
from agentgym_rl.learner import model as lm
from agentgym_rl.learner.attention import AttentionKind
from agentgym_rl.learner.losses import policy_loss
from figures import figure

LOCAL = "megatron-core, local attn + CE"
UNFUSED = "megatron-core, unfused SwiGLU"


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


def timed_interleaved(
    steps: dict[str, Callable[[], None]], iters: int, clock: Callable[[], float]
) -> dict[str, float]:
    """Median seconds per step of each, one step of every stack per round (after a warm-up)."""
    for step in steps.values():
        step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(iters):
        for name, step in steps.items():
            t0 = clock()
            step()
            times[name].append(clock() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def megatron_step(
    hf: Qwen2ForCausalLM, b: dict, *, attention: AttentionKind, fused: bool, swiglu: bool = True
) -> tuple[Callable[[], None], Callable[[], torch.Tensor]]:
    mg = lm.build_gpt_model(hf.config, attention=attention, fused_swiglu=swiglu)
    spec = convert.ConvertSpec.from_hf(hf.config, 1, mg.vocab_size)
    convert.load_hf_weights(mg, hf.state_dict(), spec)

    def logprobs() -> torch.Tensor:
        ids, pos, labels = b["input_ids"], b["position_ids"], b["labels"]
        return lm.token_logprobs(mg, ids, pos, labels, 1.0, fused=fused)

    return step_fn(list(mg.parameters()), logprobs, b), logprobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small batch, 2 rounds (smoke run)")
    parser.add_argument("--iters", type=int, default=None, help="timed rounds (default 7)")
    parser.add_argument(
        "--ablation", action="store_true", help="also time Megatron's local attention + CE path"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument(
        "--cpu-time", action="store_true", help="time process CPU seconds, not wall seconds"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    clock = time.process_time if args.cpu_time else time.perf_counter
    hidden, layers, vocab = 256, 4, 4096
    rows, seq, iters = (4, 128, 2) if args.quick else (8, 256, 7)
    iters = args.iters or iters
    hf = hf_model(hidden, layers, vocab)
    b = batch(vocab, rows, seq)

    lm.init_parallel(tp=1, pp=1, seed=0)
    mg_step, mg_logprobs = megatron_step(hf, b, attention="sdpa", fused=True)

    def hf_logprobs() -> torch.Tensor:
        logits = hf(input_ids=b["input_ids"]).logits.float()
        return torch.log_softmax(logits, dim=-1).gather(-1, b["labels"][..., None])[..., 0]

    with torch.no_grad():
        diff = (mg_logprobs() - hf_logprobs()).abs().max().item()
    steps = {"megatron-core GPTModel": mg_step}
    if args.ablation:
        steps[UNFUSED], _ = megatron_step(hf, b, attention="sdpa", fused=True, swiglu=False)
        steps[LOCAL], _ = megatron_step(hf, b, attention="local", fused=False, swiglu=False)
    steps["transformers Qwen2"] = step_fn(list(hf.parameters()), hf_logprobs, b)
    seconds = timed_interleaved(steps, iters, clock)
    lm.shutdown_parallel()
    tokens = rows * seq
    n_params = sum(p.numel() for p in hf.parameters())
    print(f"model: Qwen2 {n_params / 1e6:.1f}M params, batch {rows} x {seq} tokens, CPU")
    kind = "CPU" if args.cpu_time else "wall"
    print(f"threads: {torch.get_num_threads()}, median {kind} time of {iters} interleaved rounds")
    print(f"log-prob max |diff| megatron vs transformers before training: {diff:.2e}")
    for name, t in seconds.items():
        print(f"{name:<31}: {tokens / t:10.0f} tokens/s ({t * 1e3:.0f} ms/step)")
    t_hf = seconds["transformers Qwen2"]
    print(f"ratio megatron / transformers: {t_hf / seconds['megatron-core GPTModel']:.2f}x")
    figure(
        "learner", "train step", tokens / seconds["megatron-core GPTModel"], "tokens/s",
        baseline=tokens / t_hf, baseline_name="transformers", target=">= 1x",
    )  # fmt: skip
    if args.ablation:
        print(f"ratio unfused SwiGLU / transformers: {t_hf / seconds[UNFUSED]:.2f}x")
        print(f"ratio local path / transformers: {t_hf / seconds[LOCAL]:.2f}x")


if __name__ == "__main__":
    main()
