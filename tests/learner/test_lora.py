"""Low-rank adapters on the Megatron-core policy: they start as the base model, only they
train, disabling them gives the base back, and tensor parallel 2 (torchrun, gloo) computes what
one process does."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from learner_fixtures import make_batch, tiny_hf_model
from lora_worker import TEMPERATURE, VOCAB, lora_case

from agentgym_rl.learner import convert, lora
from agentgym_rl.learner import model as lm
from agentgym_rl.processes.ports import free_port

pytestmark = pytest.mark.engine
WORKER = Path(__file__).with_name("lora_worker.py")


@pytest.fixture
def one_process() -> Iterator[None]:
    lm.init_parallel(tp=1, seed=0)
    yield
    lm.shutdown_parallel()


def policy() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    hf = tiny_hf_model("qwen2", vocab=VOCAB, heads=4, kv_heads=2, head_dim=32)
    model = lm.build_gpt_model(hf.config)
    convert.load_hf_weights(
        model, hf.state_dict(), convert.ConvertSpec.from_hf(hf.config, 1, model.vocab_size)
    )
    return model, make_batch(VOCAB, batch=2, seq=12)


def logprobs(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    ids, pos, labels = batch
    return lm.token_logprobs(model, ids, pos, labels, TEMPERATURE, vocab_size=VOCAB)


def test_adapters_start_as_the_base_and_alone_train(one_process: None) -> None:
    model, batch = policy()
    base = logprobs(model, batch).detach()
    names = lora.add_adapters(model, 4, 8.0, ["attention", "mlp"])
    assert len(names) == 2 * 4 * 2  # A and B of 4 layers in each of 2 blocks
    assert torch.equal(logprobs(model, batch).detach(), base)  # B = 0: the base exactly
    (-logprobs(model, batch).mean()).backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert set(grads) == set(names)  # the base gets no gradient (and no optimizer state)
    assert all(grads[n].abs().sum() > 0 for n in names if n.endswith(".lora_b"))
    assert all(not grads[n].any() for n in names if n.endswith(".lora_a"))  # B = 0: A waits
    assert all(not p.requires_grad for n, p in model.named_parameters() if n not in names)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith(".lora_b"):
                p.normal_(0, 0.05)
    moved = logprobs(model, batch).detach()
    assert not torch.allclose(moved, base, atol=1e-4)
    with lora.adapters_disabled(model):  # the KL term's reference: the base, no second copy
        assert torch.equal(logprobs(model, batch).detach(), base)
    assert torch.equal(logprobs(model, batch).detach(), moved)


def test_bad_targets_and_checkpoints_are_refused(one_process: None) -> None:
    model, _ = policy()
    with pytest.raises(lora.LoraError, match=r"lora targets \['embeddings'\]"):
        lora.add_adapters(model, 4, 8.0, ["embeddings"])
    lora.add_adapters(model, 4, 8.0, ["attention"])
    state = lora.adapter_state(model)
    assert all(".linear_qkv." in n or ".linear_proj." in n for n in state)
    del state[next(iter(state))]
    with pytest.raises(lora.LoraError, match="adapter checkpoint does not fit: missing"):
        lora.load_adapter_state(model, state)


def test_tensor_parallel_2_equals_one_process(tmp_path: Path, one_process: None) -> None:
    out = tmp_path / "lora.pt"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
        "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(WORKER), "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"torchrun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    two = torch.load(out)
    one = lora_case(1, 0)
    torch.testing.assert_close(two["logprobs"], one["logprobs"], atol=1e-4, rtol=1e-4)
    assert set(two["grads"]) == set(one["grads"])
    for name, grad in one["grads"].items():
        torch.testing.assert_close(two["grads"][name], grad, atol=1e-5, rtol=1e-3, msg=name)
