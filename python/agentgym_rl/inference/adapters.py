"""LoRA adapters as policy versions of a vLLM engine (`learn.lora`: only adapters stream).

Contract: `ServedAdapters(root, base_model, max_rank, version, keep)` is what an engine started with
`max_lora_rank` generates with. `load(version, tensors)` writes a version's adapters as a PEFT
folder (`root/v<version>/`, `weights/peft.py`; B comes scaled, so `lora_alpha` is the rank) and
makes it `current`: the `vllm.lora.request.LoRARequest` the next requests generate with (id
`version + 1`, so vLLM caches each version once), stamped `version`; adapters of a rank above
`max_rank` raise `AdapterError` before anything changes. The folders of all but
the newest `keep` versions are removed (vLLM holds a loaded adapter in memory: a request still
running with an older version keeps its weights). `serve(folder, version)` generates with a
PEFT folder as it is (`eval --adapter`); `drop(version)` goes back to the bare weights (a
full-weight update to `version`). `lora_engine_args(rank, max_loras)` is what vLLM is started with.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentgym_rl.weights.peft import AdapterError, peft_config, write_peft_dir

LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The `max_lora_rank` values vLLM accepts."""


def lora_engine_args(max_lora_rank: int, max_loras: int) -> dict[str, Any]:
    """vLLM's engine arguments that serve adapters up to `max_lora_rank`, `max_loras` at once."""
    return {
        "enable_lora": True,
        "max_lora_rank": served_rank(max_lora_rank),
        "max_loras": max_loras,
        "max_cpu_loras": 2 * max_loras,
    }


def served_rank(rank: int) -> int:
    """vLLM takes ranks from a fixed list: the smallest of them that holds `rank`."""
    fits = [r for r in LORA_RANKS if r >= rank]
    if not fits:
        raise AdapterError(f"LoRA rank {rank}: vLLM serves ranks up to {LORA_RANKS[-1]}")
    return fits[0]


class ServedAdapters:
    """See the module docstring."""

    def __init__(
        self, root: Path, base_model: str, max_rank: int, version: int = 0, keep: int = 8
    ) -> None:
        self.root = root
        self.base_model = base_model
        self.max_rank = max_rank
        self.keep = keep
        self.versions: list[int] = []
        self.current: Any = None
        """The `LoRARequest` new requests generate with (None: the bare weights)."""
        self.version = version
        """The policy version `current` stamps on the tokens it generates."""

    def load(self, version: int, tensors: Mapping[str, Any]) -> None:
        from vllm.lora.request import LoRARequest

        rank = peft_config(tensors, self.base_model)["r"]
        if rank > self.max_rank:
            raise AdapterError(
                f"adapters of rank {rank} arrived; this engine serves up to {self.max_rank} "
                "(rollout.engine.max_lora_rank: the learner's learn.lora.rank)"
            )
        folder = write_peft_dir(self.root / f"v{version}", tensors, self.base_model)
        self.versions.append(version)
        for old in self.versions[: -self.keep]:
            shutil.rmtree(self.root / f"v{old}", ignore_errors=True)
        self.versions = self.versions[-self.keep :]
        self.current = LoRARequest(f"v{version}", version + 1, str(folder))
        self.version = version

    def serve(self, folder: Path, version: int) -> None:
        from vllm.lora.request import LoRARequest

        self.current = LoRARequest(folder.name or "adapter", version + 1, str(folder))
        self.version = version

    def drop(self, version: int) -> None:
        self.current = None
        self.version = version

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
