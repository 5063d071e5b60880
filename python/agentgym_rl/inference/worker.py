"""Applying an update inside vLLM's workers: the worker extension and the tensor payload.

This module is imported in two places: by the engine front-end (`inference/engine.py`), which packs
HF-named tensors into a `WeightPayload`, and by every vLLM worker process, which mixes
`WeightLoaderExtension` into its worker class (engine arg
`worker_extension_cls="agentgym_rl.inference.worker.WeightLoaderExtension"`) so that
`AsyncLLM.collective_rpc("agentgym_load_weights", args=(payload,))` lands here.

Why the worker's `reload_weights` and not `model.load_weights` directly: vLLM's CPU backend
repacks every linear weight after loading (`dispatch_cpu_unquantized_gemm`: an sgl-kernel packed
copy or a oneDNN handle, then the original `weight` is replaced by an empty tensor). A bare
`load_weights` would hit those emptied parameters and leave the packed kernels stale.
`reload_weights(is_checkpoint_format=True)` runs vLLM's layerwise reload lifecycle
(`initialize_layerwise_reload` -> `model.load_weights` -> `finalize_layerwise_reload`), which
restores each layer to checkpoint format, loads, and re-runs `process_weights_after_loading`,
so the kernels are rebuilt from the new weights. It is the same lifecycle vLLM's NCCL
weight-transfer engine uses on GPUs.

Imported in a worker, it also folds vLLM's warning per tensor whose dtype differs from the
engine's (a float32 checkpoint served in bfloat16: hundreds of lines at every load) into one
line per pair of dtypes (`OneDtypeLine`).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

WeightPayload = list[tuple[str, str, list[int], bytes]]
"""`(hf_name, dtype_name, shape, raw little-endian bytes)` per tensor, as it crosses
`collective_rpc`. Raw bytes, because vLLM's msgpack decoder turns an untyped tensor argument
back into a plain list on the engine-core side."""


def to_payload(named_tensors: Any) -> WeightPayload:
    """Normalise a mapping or an iterable of `(name, tensor)` into a payload of CPU tensors."""
    items = named_tensors.items() if hasattr(named_tensors, "items") else named_tensors
    payload: WeightPayload = []
    for name, tensor in items:
        if not isinstance(name, str) or not isinstance(tensor, torch.Tensor):
            raise TypeError(f"expected (str, Tensor) pairs, got ({type(name)}, {type(tensor)})")
        t = tensor.detach().to("cpu").contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        payload.append((name, str(t.dtype).removeprefix("torch."), list(t.shape), raw))
    if not payload:
        raise ValueError("an update needs at least one tensor")
    return payload


class OneDtypeLine(logging.Filter):
    """Of vLLM's "Attempted to load weight W with dtype A into parameter with dtype B" warnings,
    says the first of each (A, B) pair once for every tensor, and drops the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.said: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Attempted to load weight %s with dtype"):
            return True
        args = record.args if isinstance(record.args, tuple) and len(record.args) == 3 else None
        pair = (str(args[1]), str(args[2])) if args else ("?", "?")
        if pair in self.said:
            return False
        self.said.add(pair)
        record.msg, record.args = "loading %s weights into %s parameters (the engine's dtype)", pair
        return True


logging.getLogger("vllm.model_executor.models.utils").addFilter(OneDtypeLine())


class WeightLoaderExtension:
    """Mixed into vLLM's worker class; methods run in each worker process.

    `self` is the vLLM worker (`CPUWorker` / `Worker`), so `self.reload_weights` and
    `self.model_runner` are available.
    """

    def agentgym_load_weights(self, payload: list[Any]) -> int:
        """Load HF-named tensors into this worker's model; returns how many were given."""
        weights = [_decode(entry) for entry in payload]
        reload = getattr(self, "reload_weights", None)
        if reload is None:  # pragma: no cover - older workers without the reload lifecycle
            model = self.model_runner.get_model()  # type: ignore[attr-defined]
            model.load_weights(weights=iter(weights))
        else:
            reload(weights_iterator=iter(weights), is_checkpoint_format=True)
            _repack_kept_cpu_kernels(self.model_runner.get_model())  # type: ignore[attr-defined]
        return len(weights)


def _repack_kept_cpu_kernels(model: torch.nn.Module) -> int:
    """Rebuild CPU GEMM kernels of layers that keep their weight (embedding, tied lm_head).

    vLLM's layerwise reload skips a tied `lm_head` (its weight is loaded through
    `embed_tokens`), so the packed copy made by `dispatch_cpu_unquantized_gemm` keeps the old
    values: measured here, logits drifted by up to 1.7 nats after an update. Layers that drop
    their weight after packing (`weight.numel() == 0`) were rebuilt by the reload itself.
    """
    repacked = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        method = getattr(module, "quant_method", None)
        if not hasattr(module, "cpu_linear") or method is None:
            continue
        if not isinstance(weight, torch.Tensor) or weight.numel() == 0:
            continue
        method.process_weights_after_loading(module)
        repacked += 1
    return repacked


def decode_tensor(dtype_name: str, shape: list[int], raw: bytes | memoryview) -> torch.Tensor:
    """Rebuild a tensor from raw bytes (a copy: the result owns writable memory)."""
    dtype = getattr(torch, dtype_name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {dtype_name!r}")
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    return flat.view(dtype).reshape([int(d) for d in shape])


def _decode(entry: Any) -> tuple[str, torch.Tensor]:
    name, dtype_name, shape, raw = entry
    return str(name), decode_tensor(str(dtype_name), list(shape), raw)
