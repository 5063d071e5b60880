"""LoRA adapters as policy versions of a vLLM engine (`learn.lora`: only adapters stream).

Contract: `AdapterStore(root, base_model, keep)` writes each version's adapters as a PEFT folder
(`root/v<version>/`, `weights/peft.py`; B comes scaled, so `lora_alpha` is the rank) and returns
the `vllm.lora.request.LoRARequest` that generates with it (id `version + 1`, so vLLM caches
each version once); the folders of all but the newest `keep` versions are removed (vLLM holds a
loaded adapter in memory: a request still running with an older version keeps its weights).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentgym_rl.weights.peft import write_peft_dir


class AdapterStore:
    """See the module docstring."""

    def __init__(self, root: Path, base_model: str, keep: int = 8) -> None:
        self.root = root
        self.base_model = base_model
        self.keep = keep
        self.versions: list[int] = []

    def write(self, version: int, tensors: Mapping[str, Any]) -> Any:
        from vllm.lora.request import LoRARequest

        folder = write_peft_dir(self.root / f"v{version}", tensors, self.base_model)
        self.versions.append(version)
        for old in self.versions[: -self.keep]:
            shutil.rmtree(self.root / f"v{old}", ignore_errors=True)
        self.versions = self.versions[-self.keep :]
        return LoRARequest(f"v{version}", version + 1, str(folder))

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
