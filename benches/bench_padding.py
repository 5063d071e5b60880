"""Padding in the learner's micro-batches: where the rows are cut, on the learner's own step.

The learner's `Trainer.train_step` (Megatron-core, the fused path) on one step of 48 samples
(6 groups of 8) whose lengths are drawn uniformly from the main run's range (118-638 tokens;
its first 60 steps replayed through the old greedy cut computed 0.80 real tokens per computed
one), micro-batches of at most 8,192 padded tokens, a model of the main run's size (hidden 192,
4 layers). Side by side, interleaved rounds, median step time: the fewest micro-batches (`null`,
the greedy cut's count, then least padding) against cuts that weigh padding against a
micro-batch's fixed cost (`micro_batch_overhead_tokens`). Per cut: micro-batches, computed
tokens, the real share of them, real tokens/s and the ratio to the fewest. Then a least-squares
fit of step time = base + a x computed tokens + c x micro-batches over the cuts: c / a is what one
micro-batch costs here, in padded tokens (the option's measured value on this machine).

Beside the synthetic step, the main run's real lengths: `--real` (default
docs/results/babyai-goto/sample-lengths.json, its training groups in the order they finished, kept
by `--save-real RUN`) cut by each option into every step's micro-batches, the real share of the
computed tokens over the whole run (a cut needs lengths alone: no model runs for it).

    python benches/bench_padding.py [--quick] [--rounds N] [--real FILE]
    python benches/bench_padding.py --save-real RUN [--real FILE]   # a run's lengths, kept
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from figures import figure

ROWS_RANGE = (118, 638)
OVERHEADS: list[int | None] = [None, 4096, 1024, 256, 0]
QUICK_OVERHEADS: list[int | None] = [None, 256, 0]
REAL = Path(__file__).resolve().parents[1] / "docs/results/babyai-goto/sample-lengths.json"
GROUPS_PER_STEP, GROUP_SIZE = 6, 8  # the main run's step


def corpus() -> list[str]:
    """Sentences for the tiny model's tokenizer (what it says does not matter here)."""
    words = "go to the red green blue ball box key door open pick up turn left right move".split()
    rng = random.Random(0)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(4, 14))) for _ in range(400)]


def sample(g: int, e: int, input_ids: np.ndarray, generated_from: int, reward: float):
    """A finished one-turn sample of group `g`, its tokens from `generated_from` on generated."""
    from agentgym_rl.wire import Status, WireSample, WireTokens

    n = len(input_ids)
    mask = np.zeros(n, np.uint8)
    mask[generated_from:] = 1
    return WireSample(
        tokens=WireTokens(
            input_ids=input_ids.astype(np.uint32),
            loss_mask=mask,
            logprobs=np.where(mask > 0, -2.0, 0.0).astype(np.float32),
            versions=np.zeros(n, np.uint32),
            turn_spans=np.array([[generated_from, n]], np.uint32),
        ),
        reward=reward,
        status=Status.DONE,
        drift=False,
        turns=1,
        turn_cap=5,
        stage=0,
        dispatch_version=0,
        request_id=f"g{g}-e{e}",
    )


def group(g: int, samples: list) -> Any:
    from agentgym_rl.wire import WireGroup

    return WireGroup(group_id=g, task_id=f"t{g}", env="babyai", samples=samples)


def groups(rng: np.random.Generator, n_groups: int, group_size: int, vocab: int) -> list:
    """Synthetic groups, lengths uniform over the main run's range, the last fifth generated (as
    a few short turns are)."""
    out = []
    for g in range(n_groups):
        samples = []
        for e in range(group_size):
            n = int(rng.integers(ROWS_RANGE[0], ROWS_RANGE[1] + 1))
            samples.append(sample(g, e, rng.integers(3, vocab, size=n), int(n * 0.8), float(e % 2)))
        out.append(group(g, samples))
    return out


def save_real(run: Path, out: Path) -> None:
    """Keep `run`'s training groups as sample lengths (complete groups of the learner's samples,
    in the order they finished; held-out episodes left out) in the compact record `out`."""
    from agentgym_rl.learner.batch import EXCLUDED_STATUSES

    excluded = {s.value for s in EXCLUDED_STATUSES}
    groups: dict[tuple[str, int], list[int]] = {}
    sizes: dict[tuple[str, int], int] = {}
    for log in sorted(run.glob("rollout-*/episodes.jsonl")):
        for line in log.read_text().splitlines():
            e = json.loads(line)
            if e.get("split", "train") != "train":
                continue
            key = (log.parent.name, int(e["group_id"]))
            sizes[key] = sizes.get(key, 0) + 1
            if e["status"] not in excluded:
                groups.setdefault(key, []).append(len(e["input_ids"]))
    complete = [g for k, g in groups.items() if sizes[k] == GROUP_SIZE]
    record = {
        "what": "sample lengths (tokens) of a run's training groups, in the order they finished",
        "run": run.name,
        "group_size": GROUP_SIZE,
        "groups": complete,
    }
    out.write_text(json.dumps(record, separators=(",", ":")) + "\n")
    print(f"{out}: {len(complete)} groups, {sum(map(len, complete))} samples of {run}")


def real_steps(path: Path) -> list[list[list[int]]]:
    """The record's groups as the main run's steps (six groups each; a partial last one left)."""
    groups = json.loads(path.read_text())["groups"]
    n = len(groups) // GROUPS_PER_STEP
    return [groups[i * GROUPS_PER_STEP : (i + 1) * GROUPS_PER_STEP] for i in range(n)]


def real_shares(steps: list[list[list[int]]], overheads: list[int | None]) -> None:
    """Each cut's real share of the computed tokens over every real step, and its micro-batches."""
    from agentgym_rl.learner.batch import collate

    print(f"\nthe main run's real lengths: {len(steps)} steps of {GROUPS_PER_STEP} groups")
    print("| cut | micro-batches a step | real / computed |")
    print("|---|---:|---:|")
    share: dict[int | None, float] = {}
    for overhead in overheads:
        real = computed = micro = 0
        for step in steps:
            batch = collate(length_groups(step))
            cut = batch.split(8192, overhead)
            real += int(batch.lengths.sum())
            computed += sum(mb.input_ids.numel() for mb in cut)
            micro += len(cut)
        share[overhead] = real / computed
        name = "fewest micro-batches" if overhead is None else f"overhead {overhead} tokens"
        print(f"| {name} | {micro / len(steps):.1f} | {share[overhead]:.3f} |")
    figure(
        "padding", "real of computed tokens, fewest micro-batches, main run's lengths",
        share[None], "", ceiling=1.0, ceiling_name="no padding", target=">= 0.85",
    )  # fmt: skip


def length_groups(step: list[list[int]]) -> list:
    """Wire groups whose samples have `step`'s lengths (the cut reads lengths alone)."""
    return [
        group(g, [sample(g, e, np.zeros(n, np.int64), 0, 0.0) for e, n in enumerate(lengths)])
        for g, lengths in enumerate(step)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="2 groups, 3 cuts, 1 round (smoke run)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 5)")
    parser.add_argument(
        "--real", type=Path, default=REAL, help="the main run's sample lengths (compact record)"
    )
    parser.add_argument(
        "--save-real", type=Path, metavar="RUN", help="keep RUN's sample lengths in --real, exit"
    )
    args = parser.parse_args()
    if args.save_real is not None:
        save_real(args.save_real, args.real)
        return
    from agentgym_rl.config.learn import LearnConfig
    from agentgym_rl.learner.trainer import Trainer
    from agentgym_rl.policy_creation import create_tiny_model

    n_groups, rounds = (2, 1) if args.quick else (6, args.rounds or 5)
    overheads = QUICK_OVERHEADS if args.quick else OVERHEADS
    with tempfile.TemporaryDirectory() as tmp:
        size = (  # the quick form: a smoke run, its model small and its SwiGLU not compiled
            {"hidden": 64, "layers": 2, "heads": 1, "kv_heads": 1, "intermediate": 128}
            if args.quick
            else {"hidden": 192, "layers": 4, "heads": 3, "kv_heads": 3, "intermediate": 576}
        )
        model = create_tiny_model(Path(tmp) / "model", corpus=corpus(), vocab_size=800, **size)
        vocab = int(json.loads((model / "config.json").read_text())["vocab_size"])
        config = LearnConfig.model_validate(
            {
                "model": model,
                "groups_per_step": n_groups,
                "micro_batch_tokens": 8192,
                "weights": None,
                "checkpoint": {"dir": Path(tmp) / "ckpt", "every_steps": 10**6},
                "log_dir": Path(tmp) / "logs",
                "fused_swiglu": not args.quick,
            }
        )
        trainer = Trainer(config)
        step = groups(np.random.default_rng(0), n_groups, 8, vocab)
        times: dict[int | None, list[float]] = {o: [] for o in overheads}
        shape: dict[int | None, tuple[int, int, int]] = {}
        for r in range(rounds + 1):  # the first round warms up (and compiles the SwiGLU)
            for overhead in overheads:
                trainer.config = config.model_copy(update={"micro_batch_overhead_tokens": overhead})
                t0 = time.perf_counter()
                m = trainer.train_step(step)
                if r:
                    times[overhead].append(time.perf_counter() - t0)
                shape[overhead] = (m["micro_batches"], m["computed_tokens"], m["tokens"])
        trainer.close()
    report(times, shape, rounds)
    if args.real.is_file():
        steps = real_steps(args.real)
        real_shares(steps[:2] if args.quick else steps, overheads)
    else:
        print(f"\nno real lengths at {args.real} (--save-real RUN keeps a run's)")


def report(
    times: dict[int | None, list[float]], shape: dict[int | None, tuple[int, int, int]], rounds: int
) -> None:
    median = {o: statistics.median(t) for o, t in times.items()}
    real = shape[None][2]
    print(f"one step: {real} real tokens, micro-batches of at most 8192 padded tokens; median of")
    print(f"{rounds} interleaved rounds, CPU")
    print("| cut | micro-batches | computed tokens | real / computed | real tokens/s | vs fewest |")
    print("|---|---:|---:|---:|---:|---:|")
    for o in times:
        micro, computed, _ = shape[o]
        name = "fewest micro-batches" if o is None else f"overhead {o} tokens"
        rate = real / median[o]
        ratio = median[None] / median[o]
        print(
            f"| {name} | {micro} | {computed} | {real / computed:.3f} | {rate:.0f} | {ratio:.2f}x |"
        )
    best = min(median, key=lambda o: median[o])
    figure(
        "padding", f"learner step, fastest cut (overhead {best})", real / median[best], "tokens/s",
        baseline=real / median[None], baseline_name="fewest micro-batches",
    )  # fmt: skip
    figure(
        "padding", "real of computed tokens, fewest micro-batches", real / shape[None][1], "",
        ceiling=1.0, ceiling_name="no padding", target=">= 0.85",
    )  # fmt: skip
    x = np.array([[1.0, shape[o][1], shape[o][0]] for o in times])
    y = np.array([median[o] for o in times])
    (_, per_token, per_micro), *_ = np.linalg.lstsq(x, y, rcond=None)
    if per_token > 0 and per_micro > 0:
        print(
            f"fit: a micro-batch costs {per_micro * 1e3:.1f} ms, as much as "
            f"{per_micro / per_token:.0f} padded tokens (micro_batch_overhead_tokens)"
        )
    else:  # too few rounds or too much noise to separate the two costs
        print("fit: no positive cost per token and per micro-batch resolved")


if __name__ == "__main__":
    main()
