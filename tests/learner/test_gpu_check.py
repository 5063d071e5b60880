"""scripts/gpu_check.sh in its CPU form (`--cpu --tiny`), so the one-GPU check never rots: it
exits 0 and its summary holds the figures, parsed as numbers. Its GPU form runs where a GPU is
(`pytest -m gpu`): on an H200 the first GPU run found the learner's RMSNorm left on the host."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agentgym_rl.checks.gpu_check import TOLERANCE

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"([0-9.]+(?:e[-+]?\d+)?)"


def _figure(pattern: str, text: str) -> tuple[float, ...]:
    found = re.search(pattern, text)
    assert found, f"no match for {pattern!r} in:\n{text}"
    return tuple(float(g) for g in found.groups())


def _gpu_check(*args: str) -> subprocess.CompletedProcess[str]:
    """scripts/gpu_check.sh with this Python."""
    return subprocess.run(
        ["bash", str(ROOT / "scripts/gpu_check.sh"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        timeout=300,
    )


def test_cpu_tiny_form_reports_every_figure(tmp_path: Path) -> None:
    proc = _gpu_check("--cpu", "--tiny", "--steps", "2", "--out", str(tmp_path / "model"))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-3000:]
    (tokens_per_s,) = _figure(rf"train\s+tokens/s\s+{NUMBER}\s+2 steps of", out)
    assert tokens_per_s > 0
    assert re.search(r"train\s+MFU\s+n/a", out)  # no peak FLOPs on CPU
    max_diff, tol = _figure(rf"logp fp32\s+max \|diff\|\s+{NUMBER}\s+\(tol {NUMBER}\) PASS", out)
    (mean_diff,) = _figure(rf"logp fp32\s+mean \|diff\|\s+{NUMBER}", out)
    assert tol == TOLERANCE["fp32"] and 0 <= mean_diff <= max_diff < tol
    assert "logp bf16" not in out  # fp32 on CPU: one precision to compare
    for stage in ("export", "publish"):
        rate, gb, seconds = _figure(
            rf"{stage}\s+GB/s\s+{NUMBER}\s+\({NUMBER} GB in {NUMBER} s\)", out
        )
        assert rate > 0 and seconds > 0 and gb == pytest.approx(0.021, abs=0.001)
    assert out.rstrip().endswith("RESULT: PASS")
    assert (tmp_path / "model" / "config.json").is_file()  # --out keeps the model


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_gpu_tiny_form_passes(tmp_path: Path) -> None:
    """The learner on CUDA in bf16: trains, its log-probs agree with transformers', exports."""
    proc = _gpu_check("--tiny", "--steps", "2", "--out", str(tmp_path / "model"))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "bf16, NVIDIA" in proc.stdout and "RESULT: PASS" in proc.stdout
    (mfu,) = _figure(rf"train\s+MFU\s+{NUMBER}%", proc.stdout)
    assert mfu > 0


def test_model_option_takes_a_folder_as_it_is_and_refuses_tiny_beside_it(tmp_path: Path) -> None:
    from agentgym_rl.checks.gpu_check import parse_args, real_model

    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert real_model(str(folder), tmp_path / "work") == folder
    assert not (tmp_path / "work").exists()  # nothing converted, nothing written
    assert parse_args(["--model", str(folder)]).model == str(folder)
    with pytest.raises(SystemExit):
        parse_args(["--model", str(folder), "--tiny"])
