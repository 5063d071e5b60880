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

`MergedAdapters(model_dir, max_rank)` is the other way to serve them (`engine.lora_serving:
merged`): the stream still carries adapters alone, and the engine's process merges each version
into the base weights it read from `model_dir` once (W = W0 + B A, B scaled as on the wire) and
loads them as a full-weight update. vLLM's CPU build generates with a served adapter at about a
fifth of the merged weights' speed (docs/learner.md); a merge costs one local reload a version.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentgym_rl.weights.peft import PEFT_PREFIX, AdapterError, peft_config, write_peft_dir

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


class MergedAdapters:
    """See the module docstring."""

    def __init__(self, model_dir: Path, max_rank: int) -> None:
        self.model_dir = model_dir
        self.max_rank = max_rank
        self._base: dict[str, Any] | None = None

    def base(self) -> dict[str, Any]:
        """The base model's HF-named tensors, read once (the first version merged)."""
        if self._base is None:
            from safetensors.torch import load_file

            files = sorted(self.model_dir.glob("*.safetensors"))
            if not files:
                raise AdapterError(f"no *.safetensors in {self.model_dir} to merge adapters into")
            self._base = {n: t for f in files for n, t in load_file(str(f)).items()}
        return self._base

    def merged(self, tensors: Mapping[str, Any]) -> dict[str, Any]:
        """Every base tensor, those the adapters target with B A added: vLLM reloads a layer
        whole, so each layer gets all of its tensors."""
        import torch

        rank = peft_config(tensors, str(self.model_dir))["r"]
        if rank > self.max_rank:
            raise AdapterError(
                f"adapters of rank {rank} arrived; this engine merges up to {self.max_rank} "
                "(rollout.engine.max_lora_rank: the learner's learn.lora.rank)"
            )
        base = self.base()
        out = dict(base)
        for name, a in tensors.items():
            if not name.endswith(".lora_A.weight"):
                continue
            module = name.removeprefix(PEFT_PREFIX).removesuffix(".lora_A.weight")
            b = tensors.get(f"{PEFT_PREFIX}{module}.lora_B.weight")
            w = base.get(f"{module}.weight")
            if b is None or w is None:
                missing = "its lora_B" if b is None else f"a base weight {module}.weight"
                raise AdapterError(f"adapter {name}: no {missing} to merge with")
            delta = b.to(torch.float32) @ a.to(torch.float32)
            out[f"{module}.weight"] = (w.to(torch.float32) + delta).to(w.dtype)
        return out
