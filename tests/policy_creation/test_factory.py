"""The tiny-model factory: deterministic files, loadable by transformers (vLLM: tests/rollout)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
import torch

from agentgym_rl.policy_creation import CHATML_TEMPLATE, create_tiny_model
from agentgym_rl.policy_creation.factory import learned_phrases
from vllm_fixtures import tiny_corpus

FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
)


def test_same_seed_same_bytes_and_fast(tmp_path: Path) -> None:
    a = create_tiny_model(tmp_path / "a", corpus=tiny_corpus(), vocab_size=300, seed=3)
    t0 = time.perf_counter()  # the second build: transformers is imported by now
    b = create_tiny_model(tmp_path / "b", corpus=tiny_corpus(), vocab_size=300, seed=3)
    elapsed = time.perf_counter() - t0
    c = create_tiny_model(tmp_path / "c", corpus=tiny_corpus(), vocab_size=300, seed=4)
    assert sorted(p.name for p in a.iterdir()) == sorted(FILES)
    for name in FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()
    assert (a / "tokenizer.json").read_bytes() == (c / "tokenizer.json").read_bytes()
    assert elapsed < 15  # a guard against a pathological build (it takes < 1 s), not a target


def test_loads_in_transformers_with_chatml(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = create_tiny_model(tmp_path, corpus=tiny_corpus(), vocab_size=300, kv_heads=2)
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    assert [tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_start|>")] == [0, 1]
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == 2
    assert json.loads((path / "tokenizer_config.json").read_text())["chat_template"] == (
        CHATML_TEMPLATE
    )
    text = tok.apply_chat_template(
        [{"role": "user", "content": "go to the red ball"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text == "<|im_start|>user\ngo to the red ball<|im_end|>\n<|im_start|>assistant\n"
    ids = tok("go to the red ball")["input_ids"]
    assert tok.decode(ids) == "go to the red ball" and len(ids) < len("go to the red ball")
    cfg = model.config
    assert cfg.vocab_size == len(tok) <= 300
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.head_dim) == (128, 2, 64)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads) == (2, 2)
    assert cfg.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    # the engine's end tokens are exactly the template's turn end: an assistant turn rendered
    # by the template closes with it, and no other token ends generation
    gen = json.loads((path / "generation_config.json").read_text())
    turn = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "go"}],
        tokenize=False,
    )
    closing = tok(turn.split("<|im_start|>assistant\ngo", 1)[1])["input_ids"][0]
    assert gen["eos_token_id"] in (closing, [closing]) and closing == tok.eos_token_id
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), cfg.vocab_size) and torch.isfinite(logits).all()


def test_rejects_bad_head_layout(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kv_heads"):
        create_tiny_model(tmp_path, corpus=["a b c"], heads=2, kv_heads=3)


def _goto_corpus(lines: int = 300) -> list[str]:
    rng = random.Random(0)
    objects = [f"{c} {t}" for c in ("red", "blue", "grey") for t in ("ball", "key", "box")]
    out = []
    for _ in range(lines):
        seen = rng.sample(objects, 3)
        listed = ", ".join(f"go to {o} {rng.randint(1, 2)}" for o in seen)
        out.append(f"Goal: go to {rng.choice(objects)}\nActions: turn left, {listed}")
    return out


def test_phrase_tokens_are_one_token_everywhere(tmp_path: Path) -> None:
    """A learned phrase is one token, and transformers (which imposes its own word split on
    qwen2 checkpoints), the Rust core and decoding all agree on every id."""
    from transformers import AutoTokenizer

    from agentgym_rl._core import ChatTokenizer

    corpus = _goto_corpus()
    phrases = learned_phrases(corpus, 450)
    assert {" go to red ball", " go to grey box", " turn left"} <= set(phrases)
    words = {w for text in corpus for w in text.replace(",", " ").split()}
    assert all(len(p.split()) > 1 and set(p.split()) <= words for p in phrases)

    plain = create_tiny_model(tmp_path / "plain", corpus=corpus, vocab_size=450)
    path = create_tiny_model(
        tmp_path / "phrases", corpus=corpus, vocab_size=450, phrase_tokens=True
    )
    hf, rust = AutoTokenizer.from_pretrained(str(path)), ChatTokenizer.from_dir(str(path))
    text = "Goal: go to red ball\nActions: turn left, go to blue key 2, go to red ball 1"
    ids = hf(text, add_special_tokens=False)["input_ids"]
    assert list(rust.encode(text)) == ids
    assert hf.decode(ids) == rust.decode(ids) == text
    pieces = [hf.decode([i]) for i in ids]
    assert pieces.count(" go to red ball") == 2 and " go to blue key" in pieces
    base = AutoTokenizer.from_pretrained(str(plain))(text, add_special_tokens=False)["input_ids"]
    assert len(ids) < len(base)
    chat = [
        {"role": "user", "content": text},
        {"role": "assistant", "content": "Action: turn left"},
    ]
    assert list(rust.apply_chat_template(json.dumps(chat))) == hf.apply_chat_template(
        chat, tokenize=True, return_dict=False
    )
