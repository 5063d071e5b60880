"""Resumable learner checkpoints, written atomically, plus an HF export transformers loads.

Layout of `<root>/step_<n>/` (built as `step_<n>.tmp/`, renamed by rank 0, then `COMPLETE`
written last, so a directory without `COMPLETE` is an interrupted save and is ignored):

* `dist/`: a Megatron distributed checkpoint (with `learn.lora`: of the adapters alone, the base
  being `config.model`) (`megatron.core.dist_checkpointing`, torch_dist
  format) of the model's sharded state dict and the AdamW moments, each moment sharded like
  its parameter (`optim_state_to_sharding_state`). Shards are keyed by their place in the whole
  model, so a run saved under one tp/pp layout loads under another;
* `rng_<r>.pt` (every rank): torch and Megatron RNG states, restored when the layout is the one
  that saved them (under another layout each rank's stream is new anyway);
* `trainer.pt` (rank 0): step, layout, AdamW's step count and group hyper-parameters,
  scheduler state, python/numpy RNG states, group accounting;
* `hf/` (rank 0, unless `checkpoint.export_hf` is off): `model.safetensors` (HF names,
  gathered over tensor parallel; with `learn.lora`, the adapters folded in) and every non-weight
  file of the source model directory (config, generation config, tokenizer);
* `adapter/` (rank 0, with `learn.lora`): the adapters as a PEFT folder on `config.model`
  (`eval --model BASE --adapter DIR` runs them).
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
from megatron.core import dist_checkpointing, tensor_parallel
from megatron.core.dist_checkpointing.optimizer import (
    get_param_id_to_sharded_param_map,
    optim_state_to_sharding_state,
)
from safetensors.torch import save_file

from agentgym_rl.learner import cpu_support, lora
from agentgym_rl.learner.checkpoint_dirs import latest_checkpoint
from agentgym_rl.learner.convert import export_hf_adapters, export_hf_weights
from agentgym_rl.weights.peft import write_peft_dir

if TYPE_CHECKING:
    from agentgym_rl.config.learn import LearnConfig
    from agentgym_rl.learner.convert import ConvertSpec
    from agentgym_rl.learner.intake import GroupIntake
    from agentgym_rl.learner.model import ParallelLayout


class TrainState(Protocol):
    """What a checkpoint saves and restores of one learner rank (a `Trainer` is one): the model,
    its optimizer and schedule, the step, the group accounting, and what the HF export needs."""

    step: int
    """Optimizer steps taken (set by a load)."""

    @property
    def config(self) -> LearnConfig: ...
    @property
    def model(self) -> Any: ...
    @property
    def optimizer(self) -> torch.optim.Optimizer: ...
    @property
    def scheduler(self) -> Any: ...
    @property
    def spec(self) -> ConvertSpec: ...
    @property
    def layout(self) -> ParallelLayout: ...
    @property
    def intake(self) -> GroupIntake: ...
    @property
    def is_rank0(self) -> bool: ...


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".safetensors.index.json")


def _barrier() -> None:
    if torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
        torch.distributed.barrier()


def export_hf_dir(state: TrainState, out: Path) -> None:
    """`model.safetensors` + the source model's config/tokenizer files (collective export)."""
    with lora.merged(state.model):  # with adapters: the base with them folded in
        tensors = export_hf_weights(state.model, state.spec)
    if not state.is_rank0:
        return
    out.mkdir(parents=True, exist_ok=True)
    owned = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    save_file(owned, str(out / "model.safetensors"), metadata={"format": "pt"})
    for f in Path(state.config.model).iterdir():
        if f.is_file() and not f.name.endswith(_WEIGHT_SUFFIXES):
            shutil.copy2(f, out / f.name)


def export_adapter_dir(state: TrainState, out: Path) -> None:
    """The adapters as a PEFT folder on `config.model`, their base (collective export)."""
    tensors = export_hf_adapters(state.model, state.spec)
    lora_config = state.config.lora
    if state.is_rank0 and lora_config is not None:
        base = str(Path(state.config.model).resolve())
        write_peft_dir(out, tensors, base, alpha=lora_config.alpha)


def _sharded_state(state: TrainState) -> dict[str, Any]:
    """The model's sharded state dict and AdamW's moments sharded like their parameters."""
    model_sd = state.model.sharded_state_dict()
    if state.config.lora is not None:  # the adapters alone: the base is config.model's
        model_sd = {k: v for k, v in model_sd.items() if lora.is_adapter(k)}
    optim_sd = state.optimizer.state_dict()
    params = [p for group in state.optimizer.param_groups for p in group["params"]]
    id_map = get_param_id_to_sharded_param_map(model_sd, params)
    # AdamW's per-parameter `step` is one number for all: it goes to trainer.pt instead
    optim_state_to_sharding_state(optim_sd, id_map, exclude_keys=("step",))
    return {"model": model_sd, "optimizer": optim_sd}


def _adam_step(state: TrainState) -> float:
    steps = {float(s["step"]) for s in state.optimizer.state.values() if "step" in s}
    if len(steps) > 1:
        raise RuntimeError(f"AdamW step differs between parameters: {sorted(steps)}")
    return steps.pop() if steps else 0.0


def _init_adam_state(state: TrainState) -> None:
    """Zero moments for every parameter that has none yet (AdamW's first step from them is the
    one from a fresh state): what a save writes before the first step, and the load template."""
    for group in state.optimizer.param_groups:
        for p in group["params"]:
            moments = state.optimizer.state[p]
            if not moments:
                moments["step"] = torch.zeros((), dtype=torch.float32)
                moments["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                moments["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)


def _layout(state: TrainState) -> tuple[int, int, int]:
    return (state.layout.tp_size, state.layout.pp_size, state.layout.dp_size)


def _lora_shape(state: TrainState) -> dict[str, Any] | None:
    """What the adapters' weights mean (rank, alpha, targets; dropout may change on resume)."""
    lora_config = state.config.lora
    return None if lora_config is None else lora_config.model_dump(exclude={"dropout"})


def _describe(lora_shape: dict[str, Any] | None) -> str:
    return "full weights" if lora_shape is None else f"LoRA adapters {lora_shape}"


def save_checkpoint(state: TrainState, root: str | Path) -> Path:
    """Save `state` as `<root>/step_<state.step>/` (collective: every rank calls)."""
    root = Path(root)
    final = root / f"step_{state.step}"
    tmp = root / f"step_{state.step}.tmp"
    if state.is_rank0:
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "dist").mkdir(parents=True)
    _barrier()
    # before the first optimizer step AdamW has no moments yet: save zeros, as every
    # checkpoint must hold them (the first step from zeros is the step from a fresh state)
    _init_adam_state(state)
    with cpu_support.host_checkpointing():
        dist_checkpointing.save(_sharded_state(state), str(tmp / "dist"))
    rng = {
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "megatron_rng": tensor_parallel.get_cuda_rng_tracker().get_states(),
    }
    torch.save(rng, tmp / f"rng_{state.layout.rank:05d}.pt")
    adam_step = _adam_step(state)
    if state.is_rank0:
        torch.save(
            {
                "step": state.step,
                "layout": _layout(state),
                "adam_step": adam_step,
                # lr and friends as the schedule left them (the moments are in dist/)
                "param_groups": [
                    {k: v for k, v in g.items() if k != "params"}
                    for g in state.optimizer.param_groups
                ],
                "scheduler": state.scheduler.state_dict(),
                "python_rng": random.getstate(),
                "numpy_rng": np.random.get_state(),
                "accounting": state.intake.counters(),
                "lora": _lora_shape(state),
            },
            tmp / "trainer.pt",
        )
    if state.config.checkpoint.export_hf:
        export_hf_dir(state, tmp / "hf")
    if state.config.lora is not None:
        export_adapter_dir(state, tmp / "adapter")
    _barrier()
    if state.is_rank0:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        with (final / "COMPLETE").open("w") as f:
            f.write(f"{state.step}\n")
            f.flush()
            os.fsync(f.fileno())
    _barrier()
    return final


def load_checkpoint(state: TrainState, path: str | Path) -> None:
    """Restore `state` from a complete checkpoint directory written by `save_checkpoint`,
    under the layout that saved it or any other."""
    path = Path(path)
    if not (path / "COMPLETE").is_file():
        raise FileNotFoundError(f"{path} is not a complete checkpoint (no COMPLETE marker)")
    shared: dict[str, Any] = torch.load(path / "trainer.pt", weights_only=False)
    if "lora" in shared and shared["lora"] != _lora_shape(state):  # older ones did not say
        raise ValueError(
            f"{path} holds {_describe(shared['lora'])}; this run asks for "
            f"{_describe(_lora_shape(state))} (learn.lora must match the run it resumes)"
        )
    _init_adam_state(state)
    with cpu_support.host_checkpointing():
        loaded = dist_checkpointing.load(_sharded_state(state), str(path / "dist"))
    state.model.load_state_dict(loaded["model"], strict=state.config.lora is None)
    optim_sd = state.optimizer.state_dict()
    # the template's parameter ids, the saved hyper-parameters and the loaded moments
    for group, saved in zip(optim_sd["param_groups"], shared["param_groups"], strict=True):
        group.update(saved)
    for param_id, moments in loaded["optimizer"]["state"].items():
        optim_sd["state"][param_id].update(moments)
        optim_sd["state"][param_id]["step"] = torch.tensor(float(shared["adam_step"]))
    state.optimizer.load_state_dict(optim_sd)
    state.scheduler.load_state_dict(shared["scheduler"])
    state.step = int(shared["step"])
    state.intake.restore(shared["accounting"])
    random.setstate(shared["python_rng"])
    np.random.set_state(shared["numpy_rng"])
    rng_file = path / f"rng_{state.layout.rank:05d}.pt"
    if tuple(shared["layout"]) == _layout(state) and rng_file.is_file():
        rng: dict[str, Any] = torch.load(rng_file, map_location="cpu", weights_only=False)
        torch.set_rng_state(rng["torch_rng"])
        if rng["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda_rng"])
        tensor_parallel.get_cuda_rng_tracker().set_states(rng["megatron_rng"])


def resume_latest(state: TrainState, root: str | Path) -> Path | None:
    """Load the newest complete checkpoint under `root`; returns it (None: none found)."""
    latest = latest_checkpoint(root)
    if latest is not None:
        load_checkpoint(state, latest)
    return latest
