"""Resumable learner checkpoints, written atomically, plus an HF export transformers loads.

Layout of `<root>/step_<n>/` (built as `step_<n>.tmp/`, renamed by rank 0, then `COMPLETE`
written last, so a directory without `COMPLETE` is an interrupted save and is ignored):

* `rank_<r>.pt` (every rank): model and optimizer state dicts, torch/Megatron RNG states;
* `trainer.pt` (rank 0): step, scheduler state, python/numpy RNG states, group accounting;
* `hf/` (rank 0, unless `checkpoint.export_hf` is off): `model.safetensors` (HF names,
  gathered over tensor parallel) and every non-weight file of the source model directory
  (config, generation config, tokenizer).
"""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from megatron.core import tensor_parallel
from safetensors.torch import save_file

from agentgym_rl.learner.convert import export_hf_weights

if TYPE_CHECKING:
    from agentgym_rl.learner.trainer import Trainer

_STEP_DIR = re.compile(r"^step_(\d+)$")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".safetensors.index.json")


def complete_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """`(step, dir)` of every complete checkpoint under `root`, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        m = _STEP_DIR.match(child.name)
        if m and child.is_dir() and (child / "COMPLETE").is_file():
            found.append((int(m.group(1)), child))
    return sorted(found)


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint directory, or None."""
    found = complete_checkpoints(root)
    return found[-1][1] if found else None


def _barrier() -> None:
    if torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
        torch.distributed.barrier()


def export_hf_dir(trainer: Trainer, out: Path) -> None:
    """`model.safetensors` + the source model's config/tokenizer files (collective export)."""
    tensors = export_hf_weights(trainer.model, trainer.spec)
    if not trainer.is_rank0:
        return
    out.mkdir(parents=True, exist_ok=True)
    owned = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    save_file(owned, str(out / "model.safetensors"), metadata={"format": "pt"})
    for f in Path(trainer.config.model).iterdir():
        if f.is_file() and not f.name.endswith(_WEIGHT_SUFFIXES):
            shutil.copy2(f, out / f.name)


def save_checkpoint(trainer: Trainer, root: str | Path) -> Path:
    """Save `trainer` as `<root>/step_<trainer.step>/` (collective: every rank calls)."""
    root = Path(root)
    final = root / f"step_{trainer.step}"
    tmp = root / f"step_{trainer.step}.tmp"
    if trainer.is_rank0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    _barrier()
    rank_state = {
        "model": trainer.model.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "megatron_rng": tensor_parallel.get_cuda_rng_tracker().get_states(),
    }
    torch.save(rank_state, tmp / f"rank_{trainer.layout.rank:05d}.pt")
    if trainer.is_rank0:
        torch.save(
            {
                "step": trainer.step,
                "scheduler": trainer.scheduler.state_dict(),
                "python_rng": random.getstate(),
                "numpy_rng": np.random.get_state(),
                "accounting": trainer.intake.counters(),
            },
            tmp / "trainer.pt",
        )
    if trainer.config.checkpoint.export_hf:
        export_hf_dir(trainer, tmp / "hf")
    _barrier()
    if trainer.is_rank0:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        with (final / "COMPLETE").open("w") as f:
            f.write(f"{trainer.step}\n")
            f.flush()
            os.fsync(f.fileno())
    _barrier()
    return final


def load_checkpoint(trainer: Trainer, path: str | Path) -> None:
    """Restore `trainer` from a complete checkpoint directory written by `save_checkpoint`."""
    path = Path(path)
    if not (path / "COMPLETE").is_file():
        raise FileNotFoundError(f"{path} is not a complete checkpoint (no COMPLETE marker)")
    rank: dict[str, Any] = torch.load(
        path / f"rank_{trainer.layout.rank:05d}.pt", map_location="cpu", weights_only=False
    )
    shared: dict[str, Any] = torch.load(path / "trainer.pt", weights_only=False)
    trainer.model.load_state_dict(rank["model"])
    trainer.optimizer.load_state_dict(rank["optimizer"])
    trainer.scheduler.load_state_dict(shared["scheduler"])
    trainer.step = int(shared["step"])
    trainer.intake.restore(shared["accounting"])
    torch.set_rng_state(rank["torch_rng"])
    if rank["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rank["cuda_rng"])
    tensor_parallel.get_cuda_rng_tracker().set_states(rank["megatron_rng"])
    random.setstate(shared["python_rng"])
    np.random.set_state(shared["numpy_rng"])


def resume_latest(trainer: Trainer, root: str | Path) -> Path | None:
    """Load the newest complete checkpoint under `root`; returns it (None: none found)."""
    latest = latest_checkpoint(root)
    if latest is not None:
        load_checkpoint(trainer, latest)
    return latest
