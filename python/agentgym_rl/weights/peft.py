"""LoRA adapters as PEFT has them, the one format of the wire, the engine and the checkpoints.

Contract: an adapter tensor is named `base_model.model.<HF module>.lora_A.weight` (A, rank x in)
or `....lora_B.weight` (B, out x rank). `is_adapter_update(names)` says whether an update is
adapters (a mix with base weights raises `AdapterError`). `write_peft_dir(folder, tensors,
base_model, alpha)` writes `adapter_config.json` (rank from A, target modules from the names,
`lora_alpha` = alpha, or the rank when B comes already scaled, as on the wire) and
`adapter_model.safetensors`: what vLLM's LoRA loader and PEFT read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

PEFT_PREFIX = "base_model.model."
ADAPTER_MARKERS = (".lora_A.weight", ".lora_B.weight")
CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"


class AdapterError(ValueError):
    """An update that is neither all adapters nor all base weights, adapters of several ranks,
    or adapters where the engine serves full weights."""


def is_adapter_update(names: Iterable[str]) -> bool:
    flags = {n.endswith(ADAPTER_MARKERS) for n in names}
    if len(flags) > 1:
        raise AdapterError("an update mixes adapters (lora_A/lora_B) and base weights")
    return flags == {True}


def peft_config(
    tensors: Mapping[str, Any], base_model: str, alpha: float | None = None
) -> dict[str, Any]:
    """The adapter_config.json of `tensors` (alpha None: B is scaled already, scale 1)."""
    ranks = {int(t.shape[0]) for n, t in tensors.items() if n.endswith(".lora_A.weight")}
    if len(ranks) != 1:
        raise AdapterError(f"adapters of ranks {sorted(ranks)}: expected one rank")
    rank = ranks.pop()
    targets = sorted({n.rsplit(".lora_", 1)[0].rsplit(".", 1)[-1] for n in tensors})
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": rank if alpha is None else alpha,
        "lora_dropout": 0.0,
        "target_modules": targets,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "base_model_name_or_path": base_model,
    }


def write_peft_dir(
    folder: Path, tensors: Mapping[str, Any], base_model: str, alpha: float | None = None
) -> Path:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    owned = {n: t.detach().to("cpu").contiguous() for n, t in tensors.items()}
    save_file(owned, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
    config = peft_config(tensors, base_model, alpha)
    (folder / CONFIG_FILE).write_text(json.dumps(config, indent=1) + "\n")
    return folder
