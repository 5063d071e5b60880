"""The engine's KV cache on a CPU, sized for the episodes a run may hold at once
(`inference/kv_cache.py`); the real engine taking it is checked in test_serve_rollouts.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgym_rl.config.rollout import EngineConfig
from agentgym_rl.inference.kv_cache import (
    FLOOR_BYTES,
    bytes_per_token,
    engine_kv_cache,
    kv_cache_bytes,
)

MAIN_SHAPE = {  # the main run's created policy
    "num_hidden_layers": 4,
    "num_attention_heads": 3,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "hidden_size": 192,
    "max_position_embeddings": 2048,
    "dtype": "float32",
}


def model(tmp_path: Path, **config: object) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_a_token_takes_keys_and_values_of_every_layer(tmp_path: Path) -> None:
    main = model(tmp_path, **MAIN_SHAPE)
    assert bytes_per_token(main) == 2 * 4 * 3 * 64 * 4 == 6144
    assert bytes_per_token(main, "bfloat16") == 3072
    # grouped-query attention, the head size from the hidden size, a 16-bit checkpoint
    (tmp_path / "gqa").mkdir()
    gqa = model(
        tmp_path / "gqa",
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        hidden_size=896,
        torch_dtype="bfloat16",
    )
    assert bytes_per_token(gqa) == 2 * 24 * 2 * 64 * 2


def test_the_cache_holds_every_episode_at_full_length_within_a_share_of_memory(
    tmp_path: Path,
) -> None:
    main = model(tmp_path, **MAIN_SHAPE)
    gib = 1 << 30
    # 64 groups of 4 at 2,048 tokens: 256 x 2048 x 6 KiB = 3 GiB
    assert kv_cache_bytes(main, sequences=256, max_model_len=2048, available_bytes=20 * gib) == (
        3 * gib
    )
    # the model's own context when the config names none
    assert kv_cache_bytes(main, sequences=256, max_model_len=None, available_bytes=20 * gib) == (
        3 * gib
    )
    # a quarter of what is available at most
    assert kv_cache_bytes(main, sequences=256, max_model_len=2048, available_bytes=8 * gib) == (
        2 * gib
    )
    # never below the floor, even with little memory or few episodes
    assert kv_cache_bytes(main, sequences=2, max_model_len=512, available_bytes=20 * gib) == (
        FLOOR_BYTES
    )
    assert kv_cache_bytes(main, sequences=256, max_model_len=2048, available_bytes=gib) == (
        FLOOR_BYTES
    )


def test_the_config_s_size_wins_and_a_model_without_config_keeps_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psutil

    class Memory:
        available = 64 << 30

    monkeypatch.setattr(psutil, "virtual_memory", Memory)
    main = model(tmp_path, **MAIN_SHAPE)
    assert engine_kv_cache(EngineConfig(kv_cache_mb=512), main, sequences=10_000) == 512 << 20
    assert engine_kv_cache(EngineConfig(), tmp_path / "absent", sequences=64) is None
    sized = engine_kv_cache(EngineConfig(max_model_len=1024), main, sequences=128)
    assert sized == 128 * 1024 * 6144  # on this CPU build of vLLM
    with pytest.raises(ValueError, match="kv_cache_mb"):
        EngineConfig(kv_cache_mb=1)
