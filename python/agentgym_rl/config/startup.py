"""Start-up checks shared by the process entry points (`serve-rollouts`, `learn`, `eval`).

A bad config or a missing model must stop a process before anything heavy starts, with one
message and exit code 2, never a traceback. Torch-free, like the rest of `agentgym_rl.config`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from agentgym_rl.config.loader import ConfigError


class _HasModel(Protocol):
    @property
    def model(self) -> object: ...


C = TypeVar("C", bound=_HasModel)


def missing_model(model: object) -> str | None:
    """Why `model` cannot be loaded locally, or None. Nothing is fetched from a hub, so the
    model must be a local HF checkpoint directory."""
    path = Path(str(model))
    if not path.is_dir():
        return (
            f"model directory {str(path)!r} not found. Point `model=` at a local HF checkpoint "
            "(config.json, safetensors, tokenizer.json with a chat template), or create a small "
            "one with agentgym_rl.policy_creation.factory.create_tiny_model."
        )
    for needed in ("config.json", "tokenizer.json"):
        if not (path / needed).is_file():
            return f"model directory {str(path)!r} has no {needed}: it is not an HF checkpoint"
    return None


def parallel_misfit(model: object, tp: int, pp: int) -> str | None:
    """Why the model in directory `model` cannot be split `tp` ways (heads, key/value heads)
    and into `pp` pipeline stages (layers), or None."""
    try:
        hf = json.loads((Path(str(model)) / "config.json").read_text())
    except (OSError, ValueError) as e:
        return f"cannot read {model}/config.json: {e}"
    sizes = [
        ("num_hidden_layers", pp, "parallel.pp"),
        ("num_attention_heads", tp, "parallel.tp"),
        ("num_key_value_heads", tp, "parallel.tp"),
    ]
    for key, parts, option in sizes:
        value = hf.get(key)
        if key == "num_key_value_heads" and value is None:
            value = hf.get("num_attention_heads")
        if isinstance(value, int) and value % parts:
            return f"the model's {key} ({value}) does not divide by {option} ({parts})"
    return None


def model_positions(model: object) -> int | None:
    """The model's own context length in tokens: `max_position_embeddings` of its config.json
    (or of its `text_config`), or None when the config does not say or a RoPE scaling factor
    stretches it (vLLM derives that length itself)."""
    try:
        hf = json.loads((Path(str(model)) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(hf, dict):
        return None
    text = hf.get("text_config")
    cfg = text if isinstance(text, dict) and "max_position_embeddings" in text else hf
    scaling = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if isinstance(scaling, dict) and "factor" in scaling:
        if scaling.get("rope_type", scaling.get("type")) not in (None, "default"):
            return None
    positions = cfg.get("max_position_embeddings")
    return positions if isinstance(positions, int) and positions > 0 else None


def context_misfit(model: object, max_model_len: int | None, option: str) -> str | None:
    """Why a context of `max_model_len` tokens (the value of `option`) does not fit the model in
    directory `model`, or None (also when either length is unknown)."""
    positions = model_positions(model)
    if max_model_len is None or positions is None or max_model_len <= positions:
        return None
    return (
        f"{option} ({max_model_len}) is larger than the model's context of {positions} tokens "
        f"(max_position_embeddings in {Path(str(model)) / 'config.json'}); "
        f"give {option} <= {positions}"
    )


def turn_misfit(
    model: object | None,
    max_model_len: int | None,
    max_tokens_per_turn: int,
    turn_option: str,
    context_option: str,
) -> str | None:
    """Why turns of `max_tokens_per_turn` tokens leave no room in the context: `max_model_len`,
    or with None the own length of the model in directory `model`; None when they fit or the
    length is unknown. The options name the two settings in the message."""
    context = max_model_len
    if context is None and model is not None:
        context = model_positions(model)
    if context is None or max_tokens_per_turn < context:
        return None
    return (
        f"{turn_option} ({max_tokens_per_turn}) must be below "
        f"the context length ({context}, {context_option})"
    )


def load_checked(
    prog: str,
    load: Callable[[str | None, Sequence[str]], C],
    path: str | None,
    overrides: Sequence[str],
) -> C | None:
    """Load and validate a config and its model directory; on failure print one line
    (`prog: reason`) to stderr and return None (the caller exits 2)."""
    try:
        config = load(path, overrides)
    except ConfigError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None
    problem = missing_model(config.model)
    if problem:
        print(f"{prog}: {problem}", file=sys.stderr)
        return None
    return config
