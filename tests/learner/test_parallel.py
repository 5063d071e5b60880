"""Tensor parallel 2 and data parallel 2 (torchrun, gloo) against one process.

The worker (`parallel_worker.py`) runs both layouts in a single torchrun launch; this module
computes the single-process reference with the same `compute_case` and compares per-token
losses, log-probs, entropies and gradients gathered back to full HF names.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from learner_fixtures import FAMILIES
from parallel_worker import compute_case

from agentgym_rl.learner import model as lm
from agentgym_rl.processes.ports import free_port

pytestmark = pytest.mark.engine

WORKER = Path(__file__).with_name("parallel_worker.py")


@pytest.fixture(scope="module")
def torchrun_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("parallel") / "results.pt"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(WORKER),
        "--out",
        str(out),
    ]
    # Workers always run on CPU over gloo, also on a CUDA machine (one GPU cannot host tp 2).
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"torchrun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return torch.load(out)


@pytest.fixture(scope="module")
def reference() -> Iterator[dict[str, Any]]:
    """The same cases in this process: tp = dp = 1."""
    lm.init_parallel(tp=1, seed=0)
    try:
        yield {
            "tp": {f: compute_case(f, 2, slice(None)) for f in FAMILIES},
            "dp": compute_case("qwen2", 4, slice(None)),
        }
    finally:
        lm.shutdown_parallel()


def _assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    torch.testing.assert_close(got["loss"], want["loss"], atol=1e-5, rtol=0)
    torch.testing.assert_close(got["logprobs"], want["logprobs"], atol=1e-5, rtol=0)
    torch.testing.assert_close(got["entropy"], want["entropy"], atol=1e-5, rtol=0)
    assert got["grads"].keys() == want["grads"].keys()
    for name, grad in want["grads"].items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(got["grads"][name], grad, atol=1e-6, rtol=1e-4, msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_tensor_parallel_matches_single_process(
    torchrun_results: dict[str, Any], reference: dict[str, Any], family: str
) -> None:
    _assert_same(torchrun_results["tp"][family], reference["tp"][family])


@pytest.mark.slow
def test_data_parallel_matches_single_process(
    torchrun_results: dict[str, Any], reference: dict[str, Any]
) -> None:
    _assert_same(torchrun_results["dp"], reference["dp"])
