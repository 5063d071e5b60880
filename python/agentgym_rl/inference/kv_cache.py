"""How much KV cache the engine gets on a CPU.

vLLM's CPU build takes a fixed KV-cache size (on a GPU it sizes the cache from the memory left,
`gpu_memory_utilization`). A cache smaller than the episodes in flight evicts the cached prefixes
of episodes waiting on their env, so each of their next turns computes the whole prompt again,
and a server cannot keep more requests in the engine without that thrashing: at 64 groups in
flight on the main policy, 256 MB gave 0.63 of vLLM's offline ceiling and 2 GB 0.96
(docs/performance.md). So the cache is sized for the run: every sequence the server may hold at
once at the full context length, within a share of the memory available when the engine starts.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym_rl.config.rollout import EngineConfig

if TYPE_CHECKING:
    from agentgym_rl.inference.engine import EngineOptions

log = logging.getLogger(__name__)

FLOOR_BYTES = 256 << 20
"""Never less (the size every engine had before sizing; a few full-length sequences)."""
MEMORY_SHARE = 0.25
"""At most this share of the memory available at start (the learner, env servers and browsers
share the machine)."""

_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}


def sized_options(
    config: EngineConfig, model: Path | str, sequences: int, **knobs: Any
) -> EngineOptions:
    """`EngineOptions.from_config(config, **knobs)` with the KV cache `engine_kv_cache` gives
    (logged), for an engine on `model` holding `sequences` sequences at once."""
    from agentgym_rl.inference.engine import EngineOptions

    kv = engine_kv_cache(config, model, sequences)
    if kv is not None:
        knobs["kv_cache_memory_bytes"] = kv
        log.info("engine KV cache: %d MiB for %d episodes at once", kv >> 20, sequences)
    return EngineOptions.from_config(config, **knobs)


def engine_kv_cache(config: EngineConfig, model: Path | str, sequences: int) -> int | None:
    """The KV-cache bytes of an engine running `config` on `model` with `sequences` sequences at
    once: `config.kv_cache_mb` when set; else None on a GPU (vLLM sizes it) or for a model
    without a local config.json (the engine's default), and `kv_cache_bytes` on a CPU."""
    if config.kv_cache_mb is not None:
        return config.kv_cache_mb << 20
    from vllm.platforms import current_platform

    if not current_platform.is_cpu() or not (Path(model) / "config.json").is_file():
        return None
    return kv_cache_bytes(
        Path(model), sequences=sequences, max_model_len=config.max_model_len, dtype=config.dtype
    )


def _model_config(model_dir: Path) -> dict:
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return dict(config.get("text_config", config))


def bytes_per_token(model_dir: Path, dtype: str = "auto") -> int:
    """Key and value bytes one token takes in every attention layer of the model at `model_dir`
    (its config.json) at `dtype` ("auto": the checkpoint's own, 4 bytes when it names none)."""
    config = _model_config(model_dir)
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or config["hidden_size"] // heads)
    kv_heads = int(config.get("num_key_value_heads") or heads)
    if dtype == "auto":
        dtype = str(config.get("dtype") or config.get("torch_dtype") or "float32")
    return 2 * int(config["num_hidden_layers"]) * kv_heads * head_dim * _DTYPE_BYTES.get(dtype, 4)


def kv_cache_bytes(
    model_dir: Path,
    *,
    sequences: int,
    max_model_len: int | None,
    dtype: str = "auto",
    available_bytes: int | None = None,
) -> int:
    """The KV cache for `sequences` sequences of `max_model_len` tokens (None: the model's
    `max_position_embeddings`) at once, at least `FLOOR_BYTES`, at most `MEMORY_SHARE` of
    `available_bytes` (None: what the machine has available now) unless that is below the
    floor."""
    if available_bytes is None:
        import psutil

        available_bytes = int(psutil.virtual_memory().available)
    if max_model_len is None:
        max_model_len = int(_model_config(model_dir)["max_position_embeddings"])
    need = sequences * max_model_len * bytes_per_token(model_dir, dtype)
    return max(FLOOR_BYTES, min(need, int(available_bytes * MEMORY_SHARE)))
