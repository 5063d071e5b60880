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
from lora_worker import TEMPERATURE, VOCAB, adapter_checkpoint, full_adapters, lora_case
from megatron.core import dist_checkpointing

from agentgym_rl.learner import convert, cpu_support, lora
from agentgym_rl.learner import model as lm
from agentgym_rl.processes.ports import free_port
from agentgym_rl.weights.peft import PEFT_PREFIX

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


def test_dropout_acts_in_the_gradient_pass_alone(one_process: None) -> None:
    model, batch = policy()
    lora.add_adapters(model, 4, 8.0, ["attention", "mlp"], dropout=0.5)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith(".lora_b"):
                p.normal_(0, 0.05)
    model.train()
    with torch.no_grad():  # the proximal policy's log-probs: no dropout, the same each time
        first, second = logprobs(model, batch), logprobs(model, batch)
    assert torch.equal(first, second)
    torch.manual_seed(1)
    dropped = logprobs(model, batch)  # the gradient pass: adapters' inputs dropped
    assert dropped.requires_grad and not torch.allclose(dropped.detach(), first, atol=1e-4)
    model.eval()
    assert torch.equal(logprobs(model, batch).detach(), first)  # eval mode: none either


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
        "--ckpt", str(tmp_path / "ckpt"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"torchrun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    two = torch.load(out)
    one = lora_case(1, 0)
    # the adapters saved under tp 2 load under tp 1 as the full adapters they were shares of
    # (a gated fc1's B included: each rank holds its rows of the gate and of the up half)
    with cpu_support.host_checkpointing():
        loaded = dist_checkpointing.load(adapter_checkpoint(one["model"]), str(tmp_path / "ckpt"))
    full = full_adapters(one["model"], 1)
    assert set(loaded) == set(full)
    for name, tensor in full.items():
        torch.testing.assert_close(loaded[name], tensor, atol=0, rtol=0, msg=name)
    torch.testing.assert_close(two["logprobs"], one["logprobs"], atol=1e-4, rtol=1e-4)
    assert set(two["grads"]) == set(one["grads"])
    for name, grad in one["grads"].items():
        torch.testing.assert_close(two["grads"][name], grad, atol=1e-5, rtol=1e-3, msg=name)
    assert set(two["peft"]) == set(one["peft"])  # the PEFT export gathers to the same adapters
    for name, tensor in one["peft"].items():
        torch.testing.assert_close(two["peft"][name], tensor, msg=name)


def test_peft_adapters_are_what_the_merged_weights_add(one_process: None) -> None:
    """Each HF projection's PEFT adapter, alpha / r * B A, is exactly what the merged export
    adds to its base weight (q, k, v from the fused QKV; gate and up from the fused fc1)."""
    model, _ = policy()
    hf = tiny_hf_model("qwen2", vocab=VOCAB, heads=4, kv_heads=2, head_dim=32)
    spec = convert.ConvertSpec.from_hf(hf.config, 1, model.vocab_size)
    lora.add_adapters(model, 4, 8.0, ["attention", "mlp"])
    with torch.no_grad():
        for n, p in model.named_parameters():
            if lora.is_adapter(n):
                p.normal_(0, 0.05)
    peft = convert.export_hf_adapters(model, spec)
    assert len(peft) == 2 * 7 * 2  # A and B of q, k, v, o, gate, up, down in 2 blocks
    with lora.merged(model):
        merged = convert.export_hf_weights(model, spec)
    base = hf.state_dict()
    for name, weight in merged.items():
        module = PEFT_PREFIX + name.removesuffix(".weight")
        if f"{module}.lora_A.weight" not in peft:
            torch.testing.assert_close(weight, base[name], msg=name)  # not adapted: the base
            continue
        a, b = peft[f"{module}.lora_A.weight"], peft[f"{module}.lora_B.weight"]
        torch.testing.assert_close(weight, base[name] + 2.0 * b @ a, msg=name)
