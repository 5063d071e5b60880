"""Trajectory building throughput: the Rust builder vs re-rendering in Python, side by side.

(a) ``agentgym_rl.trajectory.TrajectoryBuilder`` (Rust via ``_core``): generated ids appended
    verbatim, observation deltas against a fixed base, one drift check per episode.
(b) The reference way in Python: after every step, re-render the whole conversation with
    ``tokenizer.apply_chat_template(..., tokenize=True)`` and take the new suffix.

Both use Mistral's production tekken tokenizer (converted by transformers into the git-ignored
``.cache/``). Outputs are asserted identical. Run: ``python benches/bench_builder.py [--quick]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from agentgym_rl.trajectory import ChatTokenizer, TrajectoryBuilder
from figures import figure

ROOT = Path(__file__).resolve().parents[1]

WORDS = (
    "you are in a kitchen the fridge is open there is an apple milk bread on the table go north "
    "take put drawer key door locked unlocked inventory nothing happens score moves lamp desk "
    "search result price item found cheap expensive results page next previous click buy"
).split()


def _load_make_golden() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_golden", ROOT / "tests" / "fixtures" / "make_golden.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choices(WORDS, k=n_words)).capitalize() + "."


def make_episodes(n: int, turns: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    episodes = []
    for _ in range(n):
        prefix = [
            {"role": "system", "content": "You are an agent. " + _text(rng, 60)},
            {"role": "user", "content": _text(rng, 120)},
        ]
        steps = []
        for _ in range(turns):
            action = _text(rng, rng.randint(20, 80))
            obs = {"role": "user", "content": _text(rng, rng.randint(60, 200))}
            steps.append((action, obs))
        episodes.append({"prefix": prefix, "steps": steps})
    return episodes


def with_engine_ids(hf: Any, episodes: list[dict[str, Any]], eos: int) -> None:
    for ep in episodes:
        ep["engine"] = [[*hf.encode(a, add_special_tokens=False), eos] for a, _ in ep["steps"]]


def _ids(out: Any) -> list[int]:
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def build_python(hf: Any, ep: dict[str, Any]) -> tuple[list[int], list[int]]:
    """Re-render and re-encode the whole conversation after every step (the reference way)."""
    conversation = list(ep["prefix"])
    ids = _ids(hf.apply_chat_template(conversation, tokenize=True, add_generation_prompt=True))
    mask = [0] * len(ids)
    for (action, obs), gen in zip(ep["steps"], ep["engine"], strict=True):
        ids += gen
        mask += [1] * len(gen)
        conversation += [{"role": "assistant", "content": action}, obs]
        full = _ids(hf.apply_chat_template(conversation, tokenize=True, add_generation_prompt=True))
        delta = full[len(ids) :]
        ids += delta
        mask += [0] * len(delta)
    return ids, mask


def build_rust(chat: ChatTokenizer, ep: dict[str, Any]) -> Any:
    b = TrajectoryBuilder(chat, ep["prefix"], max_len=1 << 20)
    for (_, obs), gen in zip(ep["steps"], ep["engine"], strict=True):
        b.add_generated(gen, [0.0] * len(gen), 1)
        b.add_observation(obs)
    return b.finish()


def run(hf: Any, chat: ChatTokenizer, n: int, turns: int, eos: int) -> tuple[int, float, float]:
    """Build `n` episodes of `turns` steps both ways; returns (tokens, rust s, python s)."""
    episodes = make_episodes(n, turns, seed=turns)
    with_engine_ids(hf, episodes, eos)
    for ep in episodes[:4]:  # warm-up (page-in, allocator, BPE cache)
        build_rust(chat, ep)
    t0 = time.perf_counter()
    rust = [build_rust(chat, ep) for ep in episodes]
    t_rust = time.perf_counter() - t0
    t0 = time.perf_counter()
    python = [build_python(hf, ep) for ep in episodes]
    t_python = time.perf_counter() - t0
    for r, (ids, mask) in zip(rust, python, strict=True):
        assert not r.drift and not r.truncated
        assert np.array_equal(r.input_ids, np.asarray(ids, np.uint32)), "input_ids differ"
        assert np.array_equal(r.loss_mask, np.asarray(mask, np.uint8)), "loss_mask differ"
    return sum(len(r) for r in rust), t_rust, t_python


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small run for CI")
    parser.add_argument("--episodes", type=int, default=None)
    args = parser.parse_args()
    n = args.episodes or (4 if args.quick else 16)
    # The paper's ScalingInter stages for SciWorld and TextCraft: 10, 20, 30 turns.
    turn_counts = (4, 10) if args.quick else (10, 20, 30)

    from transformers import AutoTokenizer

    tekken = _load_make_golden().convert_tekken()
    hf = AutoTokenizer.from_pretrained(str(tekken))
    chat = ChatTokenizer.from_dir(tekken)
    eos = hf.convert_tokens_to_ids("</s>")

    out = sys.stdout
    out.write(f"tekken tokenizer, {n} episodes per row; outputs asserted identical\n")
    out.write("turns   tokens   rust tok/s   python tok/s   speed-up\n")
    for turns in turn_counts:
        tokens, t_rust, t_python = run(hf, chat, n, turns, eos)
        ratio = t_python / t_rust
        out.write(
            f"{turns:5d} {tokens:8d} {tokens / t_rust:12,.0f} {tokens / t_python:14,.0f}"
            f" {ratio:9.1f}x\n"
        )
        figure(
            "builder", f"trajectory build, {turns} turns", tokens / t_rust, "tokens/s",
            baseline=tokens / t_python, baseline_name="Python re-render", target=">= 20x",
        )  # fmt: skip
    out.write("(python = re-render + re-encode the whole conversation per step; target >= 20x)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
