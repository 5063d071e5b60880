"""What the engine says about dtypes: one line naming the dtype it runs and why, and vLLM's
warning per mismatched tensor folded into one line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from agentgym_rl.inference.engine import dtype_note
from agentgym_rl.inference.worker import OneDtypeLine


def _model(tmp_path: Path, **config: str) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_the_dtype_line_says_which_and_why(tmp_path: Path) -> None:
    model = _model(tmp_path, dtype="float32")
    note = dtype_note(model, "auto", "torch.bfloat16")
    assert note is not None
    assert "runs" in note and "in bfloat16, its checkpoint is float32" in note
    assert "dtype auto: vLLM's choice" in note and "--dtype float32" in note
    assert "dtype bfloat16 asked" in str(dtype_note(model, "bfloat16", "torch.bfloat16"))
    assert dtype_note(model, "auto", "torch.float32") is None  # they agree: nothing to say
    (tmp_path / "old").mkdir()
    old_key = _model(tmp_path / "old", torch_dtype="float16")  # transformers < 4.56 wrote this
    assert "its checkpoint is float16" in str(dtype_note(old_key, "auto", "torch.bfloat16"))
    assert dtype_note(tmp_path / "missing", "auto", "torch.bfloat16") is None


def _record(name: str, stored: str, param: str) -> logging.LogRecord:
    return logging.LogRecord(
        "vllm.model_executor.models.utils",
        logging.WARNING,
        __file__,
        1,
        "Attempted to load weight %s with dtype %s into parameter with dtype %s",
        (name, stored, param),
        None,
    )


def test_one_line_per_pair_of_dtypes_not_per_tensor() -> None:
    fold = OneDtypeLine()
    records = [_record(f"layers.{i}.weight", "torch.float32", "torch.bfloat16") for i in range(300)]
    kept = [r for r in records if fold.filter(r)]
    assert len(kept) == 1
    assert kept[0].getMessage() == (
        "loading torch.float32 weights into torch.bfloat16 parameters (the engine's dtype)"
    )
    assert fold.filter(_record("x", "torch.float16", "torch.bfloat16"))  # another pair: said
    other = logging.LogRecord("x", logging.WARNING, __file__, 1, "something else", None, None)
    assert fold.filter(other)
