"""Tiny-model factory: a byte-level BPE tokenizer and a random Qwen2 saved as an HF checkpoint.

`create_tiny_model` trains a tokenizer on the given corpus (ChatML special tokens, a ChatML chat
template, eos = `<|im_end|>`), builds a randomly initialised `Qwen2ForCausalLM` (tied embeddings,
fp32) and writes a checkpoint directory (config.json, generation_config.json, model.safetensors,
tokenizer.json, tokenizer_config.json) that both transformers and vLLM load unchanged. The same
seed and corpus give byte-identical files. head_dim must stay 64: vLLM's CPU attention rejects
smaller heads.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agentgym_rl.config.init_model import CREATED_CONTEXT

SPECIAL_TOKENS: tuple[str, ...] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""ChatML specials, ids 0, 1, 2 in that order."""

CHATML_TEMPLATE = """\
{%- if messages and messages[0].role == 'system' %}
    {%- set system_text = messages[0].content %}
    {%- set turns = messages[1:] %}
{%- else %}
    {%- set system_text = none %}
    {%- set turns = messages %}
{%- endif %}
{%- if system_text is not none or tools %}
    {{- '<|im_start|>system\\n' + (system_text if system_text is not none else 'You are an agent.') }}
    {%- if tools %}
        {{- '\\n\\n# Tools\\n\\nThe functions you may call, one JSON signature a line:\\n<tools>' }}
        {%- for tool in tools %}
            {{- '\\n' + tool | tojson }}
        {%- endfor %}
        {{- '\\n</tools>\\n\\nCall one by replying with its name and arguments as JSON between tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call>' }}
    {%- endif %}
    {{- '<|im_end|>\\n' }}
{%- endif %}
{%- for message in turns %}
    {%- if message.role == 'tool' %}
        {%- if loop.first or turns[loop.index0 - 1].role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
        {%- if loop.last or turns[loop.index0 + 1].role != 'tool' %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- elif message.role == 'assistant' and message.tool_calls %}
        {{- '<|im_start|>assistant\\n' + (message.content or '') }}
        {%- for call in message.tool_calls %}
            {%- set fn = call.function if call.function is defined else call %}
            {%- set args = fn.arguments if fn.arguments is string else fn.arguments | tojson %}
            {{- ('\\n' if message.content or not loop.first else '') + '<tool_call>\\n{"name": "' + fn.name + '", "arguments": ' + args + '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
"""ChatML (`<|im_start|>{role}\\n{content}<|im_end|>\\n` per message) that handles tools the Qwen
way: their schemas in the system turn, calls as `<tool_call>` JSON replies (a structured
`tool_calls` message is written in that layout), results as `<tool_response>` blocks of a user
turn."""

# GPT-2/Qwen style pre-tokenizer split (contractions, letters, digits, punctuation, spaces).
# transformers imposes exactly this split on every qwen2 checkpoint, whatever tokenizer.json says.
_WORD_PIECES = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Superword pieces: a run of words with its inner spaces, cut at digits, punctuation, newlines.
_PHRASE_PIECES = r" ?\p{N}+| ?[\p{L} ]*\p{L}|[^\s\p{L}\p{N}]+|\s+"
_PHRASE = re.compile(r" ?[^\W\d_]+(?: [^\W\d_]+)+")
_WORD = re.compile(r"[^\W\d_]+")


def _train_tokenizer(corpus: Iterable[str], vocab_size: int, pieces: str = _WORD_PIECES) -> Any:
    """A byte-level BPE `tokenizers.Tokenizer` trained on `corpus` (deterministic)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pieces), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    return tok


def learned_phrases(corpus: Sequence[str], vocab_size: int) -> list[str]:
    """The multiword tokens a superword BPE learns on `corpus`: runs of whole corpus words such
    as " go to red ball", sorted.

    A BPE whose pieces span spaces merges frequent phrases into single tokens, so a tiny model
    copies an action's object from its observation as one token rather than word by word.
    transformers re-imposes the word split on qwen2 checkpoints, so the phrases ship as added
    tokens of the word-level tokenizer (matched longest first, before the split, by transformers,
    vLLM and the Rust core alike)."""
    bpe = _train_tokenizer(corpus, vocab_size, _PHRASE_PIECES)
    words = {w for text in corpus for w in _WORD.findall(text)}
    found = {bpe.decode([i]) for i in range(bpe.get_vocab_size())}
    return sorted(p for p in found if _PHRASE.fullmatch(p) and all(w in words for w in p.split()))


def _token_id(tokenizer: Any, token: str) -> int:
    found = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(found, int):
        raise ValueError(f"no single id for {token!r}")
    return found


def create_tiny_model(
    out_dir: str | os.PathLike[str],
    *,
    corpus: Iterable[str],
    vocab_size: int = 512,
    hidden: int = 128,
    layers: int = 2,
    heads: int = 2,
    head_dim: int = 64,
    kv_heads: int = 1,
    intermediate: int | None = None,
    max_positions: int = CREATED_CONTEXT,
    phrase_tokens: bool = False,
    added_tokens: Sequence[str] = (),
    seed: int = 0,
) -> Path:
    """Write a tiny ChatML Qwen2 checkpoint to `out_dir` and return its path.

        `vocab_size` is the BPE training target; the model's vocabulary is the tokenizer's actual
        size (a corpus too small for the target gives fewer tokens), so every id the model can sample
        decodes. `phrase_tokens` adds the corpus's `learned_phrases` as tokens, `added_tokens` these
    strings (e.g. the fixed pieces of a tool call). Weights are random
        (`torch.manual_seed(seed)`), fp32, tied embeddings.
    """
    if heads % kv_heads != 0:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    import torch
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    texts = list(corpus)
    raw = _train_tokenizer(texts, vocab_size)
    if phrase_tokens or added_tokens:
        from tokenizers import AddedToken

        phrases = learned_phrases(texts, vocab_size) if phrase_tokens else []
        pieces = [*phrases, *added_tokens]
        raw.add_tokens([AddedToken(p, normalized=False, special=False) for p in pieces])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        model_max_length=max_positions,
    )
    tokenizer.save_pretrained(str(out))
    # The template lives in tokenizer_config.json (read by transformers, vLLM and the Rust
    # template renderer alike), not in a separate chat_template.jinja.
    cfg_path = out / "tokenizer_config.json"
    tok_cfg = json.loads(cfg_path.read_text())
    tok_cfg["chat_template"] = CHATML_TEMPLATE
    cfg_path.write_text(json.dumps(tok_cfg, indent=2, sort_keys=True) + "\n")

    im_end = _token_id(tokenizer, "<|im_end|>")
    eot = _token_id(tokenizer, "<|endoftext|>")
    fields: dict[str, Any] = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate or 2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=eot,
        eos_token_id=im_end,
        pad_token_id=eot,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    config = Qwen2Config(**fields)
    config.dtype = torch.float32
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    # one end token, the template's turn end: an engine that also stopped at <|endoftext|>
    # would end turns where the template does not, and the builder would rightly see drift
    model.generation_config = GenerationConfig(
        bos_token_id=eot, eos_token_id=im_end, pad_token_id=eot
    )
    model.save_pretrained(str(out), safe_serialization=True)
    return out
