"""`eval --model BASE --adapter DIR` end to end: a saved PEFT adapter on its base plays the same
held-out episodes, token for token, as the model with the adapter merged into its weights
(greedy, float32), and not the base's own. Real CLI, vLLM, BabyAI server."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from agentgym_rl.episode.log import read_episodes
from agentgym_rl.policy_creation import create_tiny_model
from agentgym_rl.weights.peft import PEFT_PREFIX, write_peft_dir
from cli_run import agentgym_cli
from vllm_fixtures import tiny_corpus

pytestmark = [pytest.mark.engine, pytest.mark.slow]

SPLIT = Path(__file__).resolve().parents[2] / "envs/agentgym_envs/babyai/data/goto_test.json"
RANK, ALPHA = 4, 8.0
TARGETS = ("q_proj", "v_proj", "down_proj")


def _adapted(base: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A PEFT folder of random adapters on `base`, and `base` with them merged in."""
    weights = load_file(str(base / "model.safetensors"))
    gen = torch.Generator().manual_seed(0)
    adapters, merged = {}, dict(weights)
    for name, w in weights.items():
        module = name.removesuffix(".weight")
        if not name.endswith(".weight") or module.rsplit(".", 1)[-1] not in TARGETS:
            continue
        a = torch.randn(RANK, w.shape[1], generator=gen) * 0.5
        b = torch.randn(w.shape[0], RANK, generator=gen) * 0.5
        adapters[f"{PEFT_PREFIX}{module}.lora_A.weight"] = a
        adapters[f"{PEFT_PREFIX}{module}.lora_B.weight"] = b
        merged[name] = w + (ALPHA / RANK) * b @ a
    adapter = write_peft_dir(tmp_path / "adapter", adapters, str(base), alpha=ALPHA)
    folder = shutil.copytree(base, tmp_path / "merged")
    save_file({k: v.contiguous() for k, v in merged.items()}, str(folder / "model.safetensors"))
    return adapter, folder


def _episodes(model: Path, out: Path, *extra: str) -> dict[str, tuple[list[int], list[int]]]:
    args = ["eval", "--model", str(model), *extra, "--split", str(SPLIT), "--limit", "6"]
    args += ["--temperature", "0", "--turn-cap", "3", "--max-tokens-per-turn", "16"]
    args += ["--dtype", "float32", "--max-model-len", "1024", "--no-yardsticks"]
    args += ["--no-progress", "--out", str(out)]
    done = agentgym_cli(*args, timeout_s=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return {r.item_id: (r.input_ids, r.loss_mask) for r in read_episodes(out / "episodes.jsonl")}


@pytest.fixture(scope="module")
def adapted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The base, its adapter folder and the merged model."""
    tmp_path = tmp_path_factory.mktemp("adapter")
    base = create_tiny_model(tmp_path / "base", corpus=tiny_corpus(), vocab_size=320, seed=0)
    return (base, *_adapted(base, tmp_path))


@pytest.fixture(scope="module")
def with_adapter(
    adapted: tuple[Path, Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[list[int], list[int]]]:
    base, adapter, _ = adapted
    out = tmp_path_factory.mktemp("adapter-eval")
    return _episodes(base, out, "--adapter", str(adapter))


def test_an_adapter_on_its_base_plays_as_the_merged_model(
    adapted: tuple[Path, Path, Path],
    with_adapter: dict[str, tuple[list[int], list[int]]],
    tmp_path: Path,
) -> None:
    as_merged = _episodes(adapted[2], tmp_path / "merged-eval")
    assert len(with_adapter) == 6 and with_adapter.keys() == as_merged.keys()
    for item, (ids, mask) in with_adapter.items():
        assert (ids, mask) == as_merged[item], f"{item}: the adapter's episode differs"


@pytest.mark.extended
def test_the_adapter_changes_what_the_base_writes(
    adapted: tuple[Path, Path, Path],
    with_adapter: dict[str, tuple[list[int], list[int]]],
    tmp_path: Path,
) -> None:
    """The equality above could hold with the adapter ignored only if the merged model played
    as the base does; it does not (a third engine: beyond CI's budget)."""
    own = _episodes(adapted[0], tmp_path / "base-eval")
    assert any(own[item][0] != with_adapter[item][0] for item in own)
