"""Format warm-up: next-token training on assistant turns of random-action transcripts.

Contract: `format_warmup(model_dir, transcripts, steps=..., ...)` loads the HF checkpoint in
`model_dir`, trains it with AdamW on the assistant tokens (each `Action: ...` turn and its
closing `<|im_end|>`; optionally the observations, weighted; system prompt and template glue
are context, never targets) and saves it back in place. The transcripts hold uniformly random
valid actions, so the model learns to write a well-formed action that names something it was
shown, not which action is good: the base policy's success stays near random play, which the
RL run has to beat.
Tokenisation is the agent loop's: each message is what it adds to the chat template's render of
the turns before it, and ChatML's special tokens keep message boundaries, so the concatenation
equals a full render.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym_rl.policy_creation.transcripts import Transcript


@dataclass(frozen=True, slots=True)
class Encoded:
    """One transcript as token ids with a target weight per token (1: assistant tokens,
    `observation_weight`: observation tokens, 0: context)."""

    ids: list[int]
    weights: list[float]


def encode(
    tokenizer: Any,
    messages: Sequence[dict[str, str]],
    *,
    observation_weight: float = 0.0,
    tools: Sequence[dict[str, Any]] | None = None,
) -> Encoded:
    """Token ids of `messages` as the chat template renders them, each weighted as a target:
    assistant turns 1, observation turns (user or tool) `observation_weight`, the rest 0. The
    system turn is rendered with `tools` (a tool transcript's schemas)."""
    ids: list[int] = []
    weights: list[float] = []
    with_tools = {"tools": list(tools)} if tools else {}
    before = ""
    for i, m in enumerate(messages):
        # each message is the render's growth (a template may add a default system turn to
        # a conversation without one, as SmolLM2's does: rendered alone, every message would
        # carry it)
        whole = tokenizer.apply_chat_template(
            list(messages[: i + 1]), tokenize=False, add_generation_prompt=False, **with_tools
        )
        if not whole.startswith(before):
            raise ValueError("the chat template renders earlier turns differently as turns grow")
        rendered, before = whole[len(before) :], whole
        enc = tokenizer(rendered, add_special_tokens=False, return_offsets_mapping=True)
        ids.extend(enc["input_ids"])
        weight = {"assistant": 1.0, "user": observation_weight, "tool": observation_weight}
        w = weight.get(m["role"], 0.0)
        if w > 0.0:
            # The content up to its closing <|im_end|> is the target; the header (and a tool
            # result's opening <tool_response>) is context. By character offsets: a BPE token
            # may merge the header's "\n" with the content.
            start = rendered.index(m["content"]) if m["content"] else 0
            end = rendered.index("<|im_end|>", start + len(m["content"])) + len("<|im_end|>")
            weights.extend(w * (a < end and b > start) for a, b in enc["offset_mapping"])
        else:
            weights.extend([0.0] * len(enc["input_ids"]))
    return Encoded(ids, weights)


def format_warmup(
    model_dir: str | Path,
    transcripts: Sequence[Transcript],
    *,
    steps: int,
    batch_size: int = 16,
    lr: float = 2e-3,
    seed: int = 0,
    threads: int | None = None,
    observation_weight: float = 0.0,
    precision: str = "fp32",
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Train `model_dir` in place for `steps` AdamW steps; returns the per-step losses.

    `observation_weight` > 0: the observation turns are targets too, each token weighing that
    much against an action token. An observation lists the available actions, each spelled from
    a label the same observation names, so predicting it is a dense copy task: the model learns
    to copy a label well before it would from the actions alone. Below 1 the replies weigh more
    against the ~75 tokens of each observation: on the README's BabyAI run, 0.1 gave lower
    held-out success after RL than 1.0 (two runs each).

    `precision` bf16 runs the forward under bf16 autocast (weights, gradients and AdamW stay
    fp32): ~2x the tokens a second of fp32 on a CPU with bf16 instructions, for a pretrained
    base whose transcripts are hundreds of tokens. The vocabulary head is applied only where a
    token is a target (the actions, ~1 in 15 tokens without observation targets)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads is not None:
        torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    encoded = [
        encode(tokenizer, t.messages, observation_weight=observation_weight, tools=t.tools)
        for t in transcripts
    ]
    if not encoded:
        raise ValueError("format warm-up needs at least one transcript")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rng = random.Random(seed)
    torch.manual_seed(seed)
    optim = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warm = max(1, steps // 20)

    def lr_at(step: int) -> float:  # linear warm-up, cosine to 10 %
        if step < warm:
            return (step + 1) / warm
        frac = (step - warm) / max(1, steps - warm)
        return 0.1 + 0.45 * (1.0 + math.cos(math.pi * frac))

    sched = torch.optim.lr_scheduler.LambdaLR(optim, lr_at)
    model.train()
    losses: list[float] = []
    for step in range(steps):
        batch = rng.sample(encoded, min(batch_size, len(encoded)))
        width = max(len(e.ids) for e in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        weights = torch.zeros((len(batch), width), dtype=torch.float32)
        attn = torch.zeros((len(batch), width), dtype=torch.long)
        for row, e in enumerate(batch):
            n = len(e.ids)
            ids[row, :n] = torch.tensor(e.ids)
            attn[row, :n] = 1
            weights[row, :n] = torch.tensor(e.weights)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            hidden = model.get_decoder()(input_ids=ids, attention_mask=attn).last_hidden_state
            w = weights[:, 1:].reshape(-1)  # token t+1 is predicted at position t
            at = w.nonzero().squeeze(1)
            logits = model.get_output_embeddings()(hidden[:, :-1].reshape(-1, hidden.shape[-1])[at])
        nll = torch.nn.functional.cross_entropy(
            logits.float(), ids[:, 1:].reshape(-1)[at], reduction="none"
        )
        loss = (nll * w[at]).sum() / w.sum().clamp_min(1e-9)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        sched.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step + 1, losses[-1])
    model.save_pretrained(str(model_dir), safe_serialization=True)
    return losses


__all__ = ["Encoded", "encode", "format_warmup"]
