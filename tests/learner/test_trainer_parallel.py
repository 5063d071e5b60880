"""The trainer under torchrun (gloo, CPU): tp 2 and dp 2 end where one process ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from trainer_fixtures import learn_config
from trainer_worker import STEPS, ListReceiver, payloads

from agentgym_rl.learner.convert import export_hf_weights
from agentgym_rl.learner.trainer import Trainer
from vllm_fixtures import tiny_corpus

WORKER = Path(__file__).with_name("trainer_worker.py")


def test_tp2_and_dp2_match_single_process(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, free_port: int
) -> None:
    from agentgym_rl.model import create_tiny_model

    model = create_tiny_model(
        tmp_path_factory.mktemp("par-tiny"),
        corpus=tiny_corpus(),
        vocab_size=320,
        kv_heads=2,  # tp must not exceed kv heads on CPU (Megatron then gathers on "cuda")
        seed=0,
    )
    vocab = int(json.loads((model / "config.json").read_text())["vocab_size"])
    out = tmp_path / "results.pt"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port}",
        str(WORKER),
        f"--model={model}",
        f"--vocab={vocab}",
        f"--out={out}",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = os.pathsep.join([str(WORKER.parent), str(WORKER.parents[1])])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"torchrun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    results = torch.load(out)

    cfg = learn_config(model, tmp_path / "single", groups_per_step=4)
    single = Trainer(cfg, receiver=ListReceiver(payloads(vocab)))
    try:
        for _ in range(STEPS):
            single.train_step(single.next_groups())  # type: ignore[arg-type]
        want = export_hf_weights(single.model, single.spec)
    finally:
        single.close()
    for layout in ("tp2", "dp2"):
        got = results[layout]
        assert got.keys() == want.keys()
        for name, tensor in want.items():
            torch.testing.assert_close(
                got[name], tensor, rtol=1e-4, atol=1e-5, msg=f"{layout} {name}"
            )
