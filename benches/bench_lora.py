"""LoRA against full fine-tuning on the learner, side by side: bytes per weight update, optimizer
state, learner peak memory and tokens/s, on random Qwen2s of the main run's policy's shape
(configs/train/babyai_goto.yaml's 2M model) and, in the full form, of Qwen2.5-0.5B's; CPU, fp32.
`--model DIR` measures real model folders instead (bench_model.py: SmolLM2 beside the 2M policy).

Each (shape, mode) runs in its own process (its peak resident memory is its own): the real
`Trainer` (`checks.gpu_check.make_trainer`, the same synthetic multi-turn groups), one untimed
step, then `--steps` timed ones; an update is what `Trainer.publish` would send (every HF weight,
or the PEFT-named adapters alone). Target (issue 63): bytes per update at rank 16 <= 5% of full
on the 0.5B shape.

Then (full form only) the rollout side on the main shape: a vLLM engine of full weights, one serving random rank-R
adapters as LoRA (`lora_serving: adapters`) and one merging them into its weights (`merged`), each
given one update and then 64 requests of 64 tokens at once (distinct 200-token prompts,
`ignore_eos`): generated tokens/s and the update's seconds, side by side.

    python benches/bench_lora.py [--quick] [--steps N] [--rank R] [--model DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from figures import figure

MAIN_SHAPE = (520, 192, 576, 4, 3, 3)
"""The main run's policy (babyai_goto.yaml's init_model): vocab, hidden, intermediate, layers,
heads, key-value heads."""


def model_work() -> Any:
    """A step of a model folder given with --model: 8 samples of 400-800 tokens (the BabyAI
    runs' episodes), 2,048-token micro-batches (babyai_goto_smollm2.yaml's)."""
    from agentgym_rl.checks import gpu_check

    return gpu_check.Workload(2, 4, 400, 800, 24, 2048, 256)


def one(shape_name: str, rank: int, steps: int, out: Path) -> dict[str, Any]:
    """Train `steps` steps of one configuration in this process; its figures."""
    import numpy as np
    import torch

    from agentgym_rl.checks import gpu_check

    given = Path(shape_name)
    if (given / "config.json").is_file():  # a real model folder, on a run's shapes of samples
        model_dir, work = given, model_work()
        vocab = json.loads((given / "config.json").read_text())["vocab_size"]
        shape_name = given.name
    else:
        shape = {"main": gpu_check.Shape(*MAIN_SHAPE), "0.5B": gpu_check.QWEN25_05B}[shape_name]
        model_dir, work, vocab = out / shape_name, gpu_check.CPU_WORK, shape.vocab_size
        if not (model_dir / "config.json").is_file():
            gpu_check.create_model(model_dir, shape, torch.device("cpu"), seed=0)
    args = argparse.Namespace(precision="fp32", steps=steps, seed=0, lora=rank)
    trainer = gpu_check.make_trainer(model_dir, out / f"{shape_name}-r{rank}", args, work)
    try:
        rng = np.random.default_rng(0)
        batches = [gpu_check.make_groups(rng, vocab, work) for _ in range(steps + 1)]
        trainer.train_step(batches[0])
        t0 = time.perf_counter()
        tokens = sum(trainer.train_step(b)["tokens"] for b in batches[1:])
        seconds = time.perf_counter() - t0
        update = trainer._weights_out()
        moments = [t for s in trainer.optimizer.state.values() for t in s.values()]
        return {
            "shape": shape_name,
            "mode": f"LoRA r{rank}" if rank else "full",
            "trained_params": sum(p.numel() for p in trainer.params),
            "update_bytes": sum(t.numel() * t.element_size() for t in update.values()),
            "optimizer_bytes": sum(t.numel() * t.element_size() for t in moments if t.dim()),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "tokens_per_s": tokens / seconds,
        }
    finally:
        trainer.publisher.close()
        trainer.close()


def random_adapters(model: Path, rank: int) -> dict[str, Any]:
    """PEFT-named rank-`rank` adapters (B scaled, as on the wire) on every attention and MLP
    projection of the Qwen2 at `model`."""
    import torch
    from safetensors.torch import load_file

    gen = torch.Generator().manual_seed(0)
    out = {}
    for name, w in load_file(str(model / "model.safetensors")).items():
        if w.ndim != 2 or not name.endswith("proj.weight"):
            continue
        module = f"base_model.model.{name.removesuffix('.weight')}"
        out[f"{module}.lora_A.weight"] = torch.randn(rank, w.shape[1], generator=gen) * 0.05
        out[f"{module}.lora_B.weight"] = torch.randn(w.shape[0], rank, generator=gen) * 0.05
    return out


async def generation(model: Path, rank: int, requests: int = 64, tokens: int = 64) -> list[dict]:
    """Generated tokens/s of full weights, served adapters and merged adapters."""
    import asyncio
    import random

    from agentgym_rl.inference.engine import EngineOptions, VllmEngine

    update = random_adapters(model, rank)
    rng = random.Random(0)
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    prompts = [[rng.randrange(3, vocab) for _ in range(200)] for _ in range(requests)]
    rows = []
    for mode in ("full weights", "adapters", "merged"):
        opts = EngineOptions(
            max_model_len=1024, max_num_seqs=requests, dtype="float32",
            max_lora_rank=None if mode == "full weights" else rank,
            lora_serving="adapters" if mode == "adapters" else "merged",
        )  # fmt: skip
        engine = await VllmEngine.start(model, opts)
        try:
            update_s = 0.0 if mode == "full weights" else await engine.update_weights(1, update)
            await engine.generate(prompts[0][:8], max_tokens=8, request_id="warm")
            t0 = time.perf_counter()
            made = await asyncio.gather(
                *(
                    engine.generate(p, max_tokens=tokens, request_id=f"r{i}", ignore_eos=True)
                    for i, p in enumerate(prompts)
                )
            )
            wall = time.perf_counter() - t0
        finally:
            engine.shutdown()
        n = sum(len(g.token_ids) for g in made)
        rows.append({"mode": mode, "tokens_per_s": n / wall, "update_s": update_s})
    return rows


def print_generation(rows: list[dict], rank: int) -> None:
    print(f"\nvLLM generation, main shape, rank {rank}: 64 requests x 64 tokens at once")
    print("| engine | tokens/s | of full weights | update s |")
    print("|---|---:|---:|---:|")
    full = rows[0]["tokens_per_s"]
    for r in rows:
        print(
            f"| {r['mode']} | {r['tokens_per_s']:.0f} | {r['tokens_per_s'] / full:.2f} | "
            f"{r['update_s']:.3f} |"
        )
    for r in rows[1:]:
        figure(
            "lora",
            f"generation tokens/s, main, rank {rank}, {r['mode']}",
            r["tokens_per_s"],
            "tokens/s",
            baseline=full,
            baseline_name="full weights",
        )


def main_shape_model(out: Path) -> Path:
    from agentgym_rl.policy_creation import create_tiny_model
    from bench_rollout import corpus

    vocab, hidden, inter, layers, heads, kv_heads = MAIN_SHAPE
    return create_tiny_model(
        out, corpus=corpus(), vocab_size=vocab, hidden=hidden, intermediate=inter,
        layers=layers, heads=heads, kv_heads=kv_heads, head_dim=hidden // heads,
    )  # fmt: skip


def run_one(shape: str, rank: int, steps: int, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", shape, str(rank), str(steps), str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ}, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{shape} rank {rank} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the main shape, 1 timed step")
    parser.add_argument("--steps", type=int, help="timed steps (default 3; quick 1)")
    parser.add_argument("--rank", type=int, default=16, help="adapter rank (default 16)")
    parser.add_argument(
        "--model",
        type=Path,
        action="append",
        default=None,
        help="an HF model folder to measure instead of the random shapes (repeatable); its "
        "steps are 8 samples of 400-800 tokens",
    )
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        shape, rank, steps, out = args.one
        print(json.dumps(one(shape, int(rank), int(steps), Path(out))))
        return
    steps = args.steps or (1 if args.quick else 3)
    shapes = ["main"] if args.quick else ["main", "0.5B"]
    if args.model:
        shapes = [str(m.resolve()) for m in args.model]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            for rank in (0, args.rank):
                rows.append(run_one(shape, rank, steps, Path(tmp)))
    print(f"CPU, fp32, {steps} timed steps after one warm-up; each row its own process")
    print(
        "| shape | mode | trained params | bytes / update | optimizer state | peak RSS | tokens/s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['shape']} | {r['mode']} | {r['trained_params'] / 1e6:.2f}M | "
            f"{r['update_bytes'] / 1e6:.2f} MB | {r['optimizer_bytes'] / 1e6:.2f} MB | "
            f"{r['peak_rss_bytes'] / 1e9:.2f} GB | {r['tokens_per_s']:.1f} |"
        )
    for shape in [r["shape"] for r in rows[::2]]:
        full, lora = (r for r in rows if r["shape"] == shape)
        share = lora["update_bytes"] / full["update_bytes"]
        print(
            f"{shape}: LoRA r{args.rank} / full: update {share:.2%}, optimizer state "
            f"{lora['optimizer_bytes'] / full['optimizer_bytes']:.2%}, peak RSS "
            f"{lora['peak_rss_bytes'] / full['peak_rss_bytes']:.2f}x, tokens/s "
            f"{lora['tokens_per_s'] / full['tokens_per_s']:.2f}x"
        )
        figure(
            "lora",
            f"bytes per update, {shape}, rank {args.rank}",
            lora["update_bytes"] / 1e6,
            "MB",
            baseline=full["update_bytes"] / 1e6,
            baseline_name="full weights",
            target="<= 5% of full (0.5B shape)",
            lower_is_better=True,
        )
        figure(
            "lora",
            f"learner tokens/s, {shape}, rank {args.rank}",
            lora["tokens_per_s"],
            "tokens/s",
            baseline=full["tokens_per_s"],
            baseline_name="full fine-tuning",
        )
    if args.quick or args.model:  # three vLLM starts on the main shape: the full form only
        return
    with tempfile.TemporaryDirectory() as tmp:
        import asyncio

        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        model = main_shape_model(Path(tmp) / "main")
        print_generation(asyncio.run(generation(model, args.rank)), args.rank)


if __name__ == "__main__":
    main()
