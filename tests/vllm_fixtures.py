"""One tiny model and ONE vLLM engine for the whole test session (engine start costs ~30 s),
behind the `vllm_engine` fixture of tests/conftest.py. The engine lives on its own event loop in
a background thread, so sync tests drive it with `handle.run(coro)`; `close()` shuts it (and its
spawned engine-core and worker processes) down.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
import torch

T = TypeVar("T")

TEMPERATURE = 0.7
WORDS = (
    "go to the red blue green grey purple yellow ball box key door open pick up drop "
    "toggle left right forward done you see a wall in front of is on your"
).split()


def tiny_corpus(seed: int = 0, lines: int = 400) -> list[str]:
    """Short BabyAI-like sentences for tokenizer training."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14))) for _ in range(lines)]


class EngineHandle:
    """The shared engine, its event-loop thread and the HF weights it currently holds."""

    def __init__(self, model_dir: Path) -> None:
        from safetensors.torch import load_file

        from agentgym_rl.inference.engine import EngineOptions, VllmEngine

        self.model_dir = model_dir
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        opts = EngineOptions(
            max_model_len=1024, max_num_seqs=64, dtype="float32", temperature=TEMPERATURE
        )
        self.engine: VllmEngine = self.run(VllmEngine.start(model_dir, opts), timeout=300)
        self.weights: dict[str, torch.Tensor] = load_file(str(model_dir / "model.safetensors"))
        self._reference: Any = None
        self._reference_version = -1

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def perturbed(self, seed: int, scale: float = 0.05) -> dict[str, torch.Tensor]:
        """The current weights plus Gaussian noise (a new policy)."""
        gen = torch.Generator().manual_seed(seed)
        return {
            k: v + scale * torch.randn(v.shape, generator=gen, dtype=v.dtype)
            for k, v in self.weights.items()
        }

    def committed(self, version: int, tensors: dict[str, torch.Tensor]) -> None:
        """Record that the engine now holds `tensors` as `version` (for reference models)."""
        self.weights = {**self.weights, **{k: v.clone() for k, v in tensors.items()}}
        assert self.engine.version == version

    def reference_logprobs(
        self, prompt: list[int], gen: list[int], weights: dict[str, torch.Tensor] | None = None
    ) -> list[float]:
        """log-softmax(logits / T) of `gen` after `prompt` under transformers, fp32."""
        from transformers import AutoModelForCausalLM

        if self._reference is None:
            self._reference = AutoModelForCausalLM.from_pretrained(
                str(self.model_dir), dtype=torch.float32
            ).eval()
        state = weights if weights is not None else self.weights
        self._reference.load_state_dict(state, strict=False)
        self._reference.tie_weights()
        ids = torch.tensor([prompt + gen])
        with torch.no_grad():
            logits = self._reference(ids).logits[0].float()
        lp = torch.log_softmax(logits / TEMPERATURE, dim=-1)
        return [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(gen)]

    def close(self) -> None:
        self.engine.shutdown()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


def start(tmp_path_factory: pytest.TempPathFactory) -> EngineHandle:
    """A tiny model made here and an engine over it."""
    from agentgym_rl.policy_creation import create_tiny_model

    out = tmp_path_factory.mktemp("tiny-qwen2")
    create_tiny_model(out, corpus=tiny_corpus(), vocab_size=320, seed=0)
    return EngineHandle(out)
