"""One-GPU smoke check of the learner: throughput, log-prob agreement, weight export.

Contract. `main(argv)` (`scripts/gpu_check.sh`, or `python -m agentgym_rl.checks.gpu_check`)
writes a random-weight HF Qwen2 checkpoint (config.json, model.safetensors; no tokenizer: the
learner reads none), or takes a real model (`--model`), and with its files under `--out`
(default: a temporary folder, removed at the end), through the learner's own code paths,
reports:

(a) train: one untimed warm-up step, then `--steps` timed `Trainer.train_step`s (collate, GRPO
    advantages, token-budgeted micro-batches of right-padded rows (`Batch.split`, the learner's
    packing), the policy loss with TIS, backward, AdamW) on synthetic groups of random
    multi-turn samples. tokens/s counts real (unpadded) tokens. MFU: model FLOPs (6 x matmul
    parameters x tokens, plus causal attention 6 x layers x q width x sum(length^2); padding
    not counted) over the dense bf16 peak (`PEAK_BF16_TFLOPS` by device name, `--peak-tflops`).
(b) log-probs: the learner's per-token log-probs (`Passes.logprobs`) of one micro-batch of a
    fresh batch against transformers' fp32 ones with the learner's weights as
    `export_hf_weights` gives them: max and mean |diff| over the loss tokens, for the learner's
    forward in fp32 and, when training in bf16, under its bf16 autocast. PASS when max <=
    `TOLERANCE`: fp32 1e-4, the bound of the learner's transformers tests (only summation
    order differs: measured max 1e-6 tiny, 3e-6 on the 0.5B shape). bf16 0.15: bf16 keeps 8
    mantissa bits; on the 0.5B shape (CPU autocast, 143 tokens) the learner measured max 3.8e-2,
    mean 1.0e-2 from the fp32 truth, transformers' own bf16 autocast max 3.3e-2, mean 8e-3, and
    a max grows with the tokens compared. Conversion or kernel errors show in the fp32 row.
(c) export: one `export_hf_weights` (HF-named full fp32 weights, on the learner's device) and
    one `Trainer.publish` into a real `WeightPublisher` with no subscribers (export, owned copy,
    device -> host, chunks with crc32 and blake2b digest, signed): bytes, seconds, GB/s.

`--model` checks a real model instead of a random one: a pretrained base `init-model --base`
knows (`smollm2-135m-instruct`: its registry wheel's GGUF converted on the spot, no hub) or an
HF folder of a Llama/Qwen2 model; the workload and the checks stay the same.

Forms: by default a Qwen2.5-0.5B-shaped model trained with bf16 autocast on CUDA on GPU-sized
batches (`GPU_WORK`, ~100k tokens a step), sized to end well inside 5 minutes on one H100.
`--tiny`: a ~5M-parameter model of the same architecture. `--cpu`: CPU, fp32, small batches
(`CPU_WORK`; CI runs `--cpu --tiny`). No network, no vLLM. Ends with a summary table; exit
status 1 when a check FAILs, 2 when the device asked for is missing.
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

# The learner (and Megatron) is imported inside the functions: `--cpu` hides CUDA first.


class Shape(NamedTuple):
    """A Qwen2's sizes, as `Qwen2Config` names them."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int


QWEN25_05B = Shape(151936, 896, 4864, 24, 14, 2)  # Qwen/Qwen2.5-0.5B's config.json
TINY = Shape(8192, 256, 768, 4, 4, 2)
# dense bf16 TFLOP/s by device-name substring, first match (H100 SXM/H200/A100 datasheets)
PEAK_BF16_TFLOPS = {
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H100": 989.0,
    "H200": 989.0,
    "A100": 312.0,
}
TOLERANCE = {"fp32": 1e-4, "bf16": 0.15}
Diff = tuple[float, float, int]
"""max and mean |learner - transformers| log-prob, and the real tokens compared."""


class Workload(NamedTuple):
    """One step's synthetic groups and the learner's token budgets."""

    groups: int
    samples: int  # per group
    min_len: int
    max_len: int
    span: int  # longest generated or observation span of a turn
    micro_batch_tokens: int
    check_tokens: int  # budget of the log-prob check's micro-batch


GPU_WORK = Workload(8, 8, 512, 3072, 256, 8192, 4096)
CPU_WORK = Workload(2, 4, 32, 160, 24, 256, 256)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true", help="run on CPU (fp32, small batches)")
    p.add_argument("--tiny", action="store_true", help="a ~5M-parameter model, not 0.5B")
    p.add_argument(
        "--model",
        default=None,
        metavar="BASE_OR_DIR",
        help="a real model instead of a random one: a base init-model --base knows "
        "(smollm2-135m-instruct) or an HF folder (Llama/Qwen2)",
    )
    p.add_argument("--steps", type=int, default=5, help="timed steps after one warm-up")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where the model (random or converted) and the check's files go",
    )
    p.add_argument("--precision", choices=("fp32", "bf16"), help="default: bf16, fp32 on CPU")
    p.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 peak for MFU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--lora",
        type=int,
        default=0,
        metavar="RANK",
        help="train LoRA adapters of this rank (attention and MLP); the publish row then "
        "measures the adapters alone",
    )
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps must be >= 1")
    if args.model and args.tiny:
        p.error("--model and --tiny both choose the model: pass one")
    args.precision = args.precision or ("fp32" if args.cpu else "bf16")
    return args


def real_model(base: str, out: Path) -> Path:
    """`base` as the learner reads it: an HF folder as it is, else `prepare_base`'s folder of
    it under `out` (a registry-shipped model is converted there)."""
    from agentgym_rl.policy_creation.pretrained import prepare_base

    folder = Path(base)
    if (folder / "config.json").is_file():
        return folder
    prepare_base(base, out / "model", say=lambda line: print(f"gpu_check: {line}"))
    return out / "model"


def create_model(out: Path, shape: Shape, device: torch.device, seed: int) -> Path:
    """A random-weight HF Qwen2 checkpoint (config.json, model.safetensors) in `out`."""
    from transformers import AutoModelForCausalLM, Qwen2Config
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    # Qwen2Config's defaults are Qwen2.5's for the rest (eps 1e-6, 32768 positions, silu)
    rope = {"rope_type": "default", "rope_theta": 1e6}
    config = Qwen2Config(**shape._asdict(), rope_parameters=rope, tie_word_embeddings=True)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(str(out), safe_serialization=True)
    return out


def _sample(rng: np.random.Generator, vocab: int, work: Workload) -> Any:
    """One finished sample: a prompt, then alternating generated / observation spans."""
    from agentgym_rl.wire import Status, WireSample, WireTokens

    n = int(rng.integers(work.min_len, work.max_len + 1))
    mask = np.zeros(n, np.uint8)
    spans, t, generated = [], n // 5, True
    while t < n:
        end = min(n, t + int(rng.integers(work.span // 4, work.span + 1)))
        if generated:
            mask[t:end] = 1
            spans.append((t, end))
        t, generated = end, not generated
    tokens = WireTokens(
        input_ids=rng.integers(3, vocab, size=n).astype(np.uint32),
        loss_mask=mask,
        logprobs=np.where(mask > 0, -math.log(vocab), 0.0).astype(np.float32),
        versions=np.zeros(n, np.uint32),
        turn_spans=np.array(spans, np.uint32).reshape(-1, 2),
    )
    reward, turns = float(rng.integers(0, 2)), len(spans)
    return WireSample(
        tokens=tokens,
        reward=reward,
        status=Status.DONE,
        drift=False,
        turns=turns,
        turn_cap=turns,
        stage=0,
        dispatch_version=0,
    )


def make_groups(rng: np.random.Generator, vocab: int, work: Workload) -> list[Any]:
    """One step's groups of random samples of multi-turn shape."""
    from agentgym_rl.wire import WireGroup

    def group(g: int) -> Any:
        samples = [_sample(rng, vocab, work) for _ in range(work.samples)]
        return WireGroup(group_id=g, task_id=f"check_{g}", env="gpu_check", samples=samples)

    return [group(g) for g in range(work.groups)]


def make_trainer(model_dir: Path, out: Path, args: argparse.Namespace, work: Workload) -> Any:
    """The real `Trainer` on `model_dir` (checkpoints and logs under `out`), publishing into a
    `WeightPublisher` nobody joins."""
    from agentgym_rl.config.learn import LearnConfig
    from agentgym_rl.learner.trainer import Trainer
    from agentgym_rl.weights.publisher import WeightPublisher

    config = LearnConfig.model_validate(
        {
            "model": model_dir,
            "groups_per_step": work.groups,
            "micro_batch_tokens": work.micro_batch_tokens,
            "precision": args.precision,
            "max_steps": args.steps + 1,
            "seed": args.seed,
            "weights": {"endpoint": "tcp://127.0.0.1:0"},
            "checkpoint": {"dir": out / "checkpoints"},
            "log_dir": out / "logs",
            "lora": {"rank": args.lora, "alpha": 2.0 * args.lora} if args.lora else None,
        }
    )
    publisher = WeightPublisher("tcp://127.0.0.1:0", secret=secrets.token_bytes(32))
    return Trainer(config, publisher=publisher)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def model_flops(trainer: Any, steps: list[list[Any]]) -> float:
    """Forward + backward model FLOPs of `steps` (real tokens, causal attention)."""
    from agentgym_rl.learner.model import head_dim_of

    params = dict(trainer.model.named_parameters())
    matmul = sum(p.numel() for p in params.values() if p.dim() == 2)
    # the input embedding is a lookup; the vocabulary head (tied or not) runs on loss tokens only
    head = params["embedding.word_embeddings.weight"].numel()
    matmul -= head if "output_layer.weight" not in params else 2 * head
    hf = trainer.hf_config
    samples = [s for gs in steps for g in gs for s in g.samples]
    lengths = np.array([len(s.tokens) for s in samples], float)
    # a sample's loss tokens are its generated ones after the first (labels are shifted)
    loss_tokens = float(sum(int(s.tokens.loss_mask[1:].sum()) for s in samples))
    q_width = hf.num_attention_heads * head_dim_of(hf)
    attention = 6.0 * hf.num_hidden_layers * q_width * float((lengths**2).sum())
    return 6.0 * matmul * float(lengths.sum()) + 6.0 * head * loss_tokens + attention


def peak_tflops(args: argparse.Namespace) -> float | None:
    if args.peak_tflops is not None or not torch.cuda.is_available():
        return args.peak_tflops
    name = torch.cuda.get_device_name()
    return next((peak for key, peak in PEAK_BF16_TFLOPS.items() if key in name), None)


def train(trainer: Any, steps: list[list[Any]], args: argparse.Namespace) -> dict[str, Any]:
    """One warm-up step, then the timed ones: tokens/s, MFU, the last loss."""
    trainer.train_step(steps[0])
    timed = steps[1:]
    _sync()
    t0 = time.perf_counter()
    metrics = [trainer.train_step(groups) for groups in timed]
    _sync()
    seconds = time.perf_counter() - t0
    tokens = sum(m["tokens"] for m in metrics)
    peak = peak_tflops(args)
    mfu = model_flops(trainer, timed) / seconds / (peak * 1e12) if peak else None
    return {
        "tokens_per_s": tokens / seconds,
        "mfu": mfu,
        "peak": peak,
        "step_s": seconds / len(timed),
        "tokens_per_step": tokens / len(timed),
        "loss": metrics[-1]["loss"],
    }


def _hf_logprobs(trainer: Any, mb: Any) -> torch.Tensor:
    """transformers' fp32 log-probs of `mb`'s labels with the learner's exported weights."""
    from transformers import AutoModelForCausalLM

    from agentgym_rl.learner import lora
    from agentgym_rl.learner.convert import export_hf_weights

    with torch.device(trainer.device):
        hf = AutoModelForCausalLM.from_config(trainer.hf_config, dtype=torch.float32)
    with lora.merged(trainer.model):  # with --lora: the adapters folded into the weights
        weights = export_hf_weights(trainer.model, trainer.spec)
    missing, unexpected = hf.load_state_dict(weights, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:  # tied: lm_head is embed_tokens
        raise RuntimeError(f"exported names do not fit transformers: {missing} {unexpected}")
    ids, labels = mb.input_ids.to(trainer.device), mb.labels.to(trainer.device)
    logits = hf(input_ids=ids).logits.float() / trainer.config.temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, labels[..., None])[..., 0]


def check_logprobs(trainer: Any, groups: list[Any], work: Workload) -> dict[str, Diff]:
    """|learner - transformers fp32| log-probs on the first micro-batch's loss tokens (the only
    ones the learner projects onto the vocabulary), for the learner's forward without autocast
    and, when it trains in bf16, with it."""
    from agentgym_rl.learner.batch import collate

    mb = collate(groups, pad_multiple=trainer.config.parallel.tp).split(work.check_tokens)[0]
    real = (mb.loss_mask > 0).to(trainer.device)
    passes = {"fp32": replace(trainer.passes, autocast=None)}
    if trainer.passes.autocast is not None:
        passes["bf16"] = trainer.passes
    out = {}
    with torch.no_grad():
        want = _hf_logprobs(trainer, mb)
        for name, p in passes.items():
            (got,) = p.logprobs([mb], trainer.model)
            diff = (got.float() - want)[real].abs()
            out[name] = (float(diff.max()), float(diff.mean()), int(real.sum()))
    return out


def time_export(trainer: Any) -> dict[str, tuple[float, float]]:
    """(bytes, seconds) of one `export_hf_weights` and of one `Trainer.publish`."""
    from agentgym_rl.learner.convert import export_hf_weights

    _sync()
    t0 = time.perf_counter()
    tensors = export_hf_weights(trainer.model, trainer.spec)
    _sync()
    export_s = time.perf_counter() - t0
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    del tensors
    publish_s = trainer.publish()["sync_s"]
    return {
        "export": (float(nbytes), export_s),
        "publish": (float(trainer.last_publish.bytes_per_server), publish_s),
    }


def _row(section: str, metric: str, value: str, note: str = "") -> None:
    print(f"  {section:<9} {metric:<11} {value:>11}  {note}".rstrip())


def report(args: argparse.Namespace, trainer: Any, results: dict[str, Any]) -> bool:
    """Print the summary table; True when every check passed."""
    tr, lp, ex = results["train"], results["logprobs"], results["export"]
    n_params = sum(p.numel() for p in trainer.model.parameters()) / 1e6
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    form = "tiny Qwen2" if args.tiny else "Qwen2.5-0.5B-shaped"
    if args.model:
        form = f"{Path(args.model).name} ({trainer.hf_config.model_type})"
    form += f", LoRA rank {args.lora}" if args.lora else ""
    print(f"\ngpu_check: {form} ({n_params:.1f}M params), {args.precision}, {device}")
    per_step = f"{tr['tokens_per_step']:.0f} tokens in {tr['step_s']:.3f} s"
    _row("train", "tokens/s", f"{tr['tokens_per_s']:.1f}", f"{args.steps} steps of {per_step}")
    if tr["mfu"] is not None:
        _row("train", "MFU", f"{100 * tr['mfu']:.3g}%", f"of {tr['peak']:.0f} TFLOP/s bf16")
    else:
        _row("train", "MFU", "n/a", "CPU" if args.cpu else "unknown device: --peak-tflops")
    _row("train", "loss", f"{tr['loss']:.4f}")
    ok = math.isfinite(tr["loss"])
    for precision, (worst, mean, tokens) in lp.items():
        tol = TOLERANCE[precision]
        ok = ok and worst <= tol
        verdict = f"(tol {tol:g}) {'PASS' if worst <= tol else 'FAIL'}, {tokens} tokens"
        _row(f"logp {precision}", "max |diff|", f"{worst:.3e}", verdict)
        _row(f"logp {precision}", "mean |diff|", f"{mean:.3e}")
    for name, (nbytes, seconds) in ex.items():
        gb = nbytes / 1e9
        _row(name, "GB/s", f"{gb / seconds:.3f}", f"({gb:.3f} GB in {seconds:.4f} s)")
    _row("total", "s", f"{time.perf_counter() - results['t0']:.1f}")
    print(f"RESULT: {'PASS' if ok else 'FAIL'}")
    return ok


def run_checks(args: argparse.Namespace, out: Path) -> bool:
    """Model, trainer, (a), (b), (c), summary; True when every check passed."""
    t0 = time.perf_counter()
    work = CPU_WORK if args.cpu else GPU_WORK
    device = torch.device("cpu" if args.cpu else "cuda")
    if args.model:
        model_dir = real_model(args.model, out)
    else:
        model_dir = create_model(out, TINY if args.tiny else QWEN25_05B, device, args.seed)
    trainer = make_trainer(model_dir, out, args, work)
    try:
        vocab = trainer.hf_config.vocab_size
        rng = np.random.default_rng(args.seed)
        steps = [make_groups(rng, vocab, work) for _ in range(args.steps + 1)]
        results = {"t0": t0, "train": train(trainer, steps, args)}
        results["logprobs"] = check_logprobs(trainer, make_groups(rng, vocab, work), work)
        results["export"] = time_export(trainer)
        return report(args, trainer, results)
    finally:
        trainer.publisher.close()
        trainer.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # effective while CUDA is not initialised
    if args.cpu == torch.cuda.is_available():
        why = "CUDA already initialised (--cpu)" if args.cpu else "no CUDA device (try --cpu)"
        print(f"gpu_check: {why}")
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu_check-"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        return 0 if run_checks(args, out) else 1
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
