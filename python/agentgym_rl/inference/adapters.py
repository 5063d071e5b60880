"""LoRA adapters as policy versions of a vLLM engine (`learn.lora`: only adapters stream).

Contract: `is_adapter_update(names)` says whether an update's tensors are adapters (PEFT names,
`...lora_A.weight` / `...lora_B.weight`; a mix with base weights raises `AdapterError`).
`AdapterStore(root, keep)` writes each version's adapters as a PEFT folder
(`root/v<version>/adapter_config.json` and `adapter_model.safetensors`, `lora_alpha` equal to the
rank: the learner sends B already scaled) and returns the `vllm.lora.request.LoRARequest` that
generates with it (id `version + 1`, so vLLM caches each version once); the folders of all but
the newest `keep` versions are removed (vLLM holds a loaded adapter in memory: a request still
running with an older version keeps its weights).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ADAPTER_MARKERS = (".lora_A.weight", ".lora_B.weight")
CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"


class AdapterError(ValueError):
    """An update that is neither all adapters nor all base weights, or adapters of no rank."""


def is_adapter_update(names: Iterable[str]) -> bool:
    flags = {n.endswith(ADAPTER_MARKERS) for n in names}
    if len(flags) > 1:
        raise AdapterError("an update mixes adapters (lora_A/lora_B) and base weights")
    return flags == {True}


def peft_config(tensors: Mapping[str, Any], base_model: str) -> dict[str, Any]:
    """The adapter_config.json of `tensors` (rank from lora_A, targets from the names)."""
    ranks = {int(t.shape[0]) for n, t in tensors.items() if n.endswith(".lora_A.weight")}
    if len(ranks) != 1:
        raise AdapterError(f"adapters of ranks {sorted(ranks)}: expected one rank")
    rank = ranks.pop()
    targets = sorted({n.rsplit(".lora_", 1)[0].rsplit(".", 1)[-1] for n in tensors})
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": rank,  # scale 1: the sender folded alpha / r into B
        "lora_dropout": 0.0,
        "target_modules": targets,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "base_model_name_or_path": base_model,
    }


class AdapterStore:
    """See the module docstring."""

    def __init__(self, root: Path, base_model: str, keep: int = 8) -> None:
        self.root = root
        self.base_model = base_model
        self.keep = keep
        self.versions: list[int] = []

    def write(self, version: int, tensors: Mapping[str, Any]) -> Any:
        from safetensors.torch import save_file
        from vllm.lora.request import LoRARequest

        folder = self.root / f"v{version}"
        folder.mkdir(parents=True, exist_ok=True)
        owned = {n: t.detach().to("cpu").contiguous() for n, t in tensors.items()}
        save_file(owned, str(folder / WEIGHTS_FILE))
        config = peft_config(tensors, self.base_model)
        (folder / CONFIG_FILE).write_text(json.dumps(config, indent=1))
        self.versions.append(version)
        for old in self.versions[: -self.keep]:
            shutil.rmtree(self.root / f"v{old}", ignore_errors=True)
        self.versions = self.versions[-self.keep :]
        return LoRARequest(f"v{version}", version + 1, str(folder))
