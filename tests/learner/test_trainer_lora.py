"""The learner with `learn.lora` on the tiny Qwen2: only the adapters train and hold optimizer
state, the KL reference is the base (adapters off), a resumed run continues exactly from an
adapter-only checkpoint, and an HF export is the base with the adapters folded in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from trainer_fixtures import learn_config, make_group

from agentgym_rl.learner import lora
from agentgym_rl.learner import model as lm
from agentgym_rl.learner.checkpoint import load_checkpoint, save_checkpoint
from agentgym_rl.learner.trainer import Trainer
from vllm_fixtures import tiny_corpus

pytestmark = pytest.mark.engine
LORA = {"rank": 4, "alpha": 8.0}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agentgym_rl.policy_creation import create_tiny_model

    out = tmp_path_factory.mktemp("learner-tiny-lora")
    return create_tiny_model(out, corpus=tiny_corpus(), vocab_size=320, seed=0)


@pytest.fixture
def trainers() -> Iterator[list[Trainer]]:
    made: list[Trainer] = []
    yield made
    for t in made:
        t.close()


def vocab(model_dir: Path) -> int:
    return int(json.loads((model_dir / "config.json").read_text())["vocab_size"])


def test_only_adapters_train_and_the_reference_is_the_base(
    model_dir: Path, tmp_path: Path, trainers: list[Trainer]
) -> None:
    t = Trainer(learn_config(model_dir, tmp_path, lora=LORA, loss={"kl_coef": 0.1}))
    trainers.append(t)
    assert t.ref_model is None  # no second copy of the model
    adapters = set(lora.adapter_state(t.model))
    params = {n for n, p in t.model.named_parameters() if p.requires_grad}
    assert params == adapters and len(t.params) == len(adapters)
    base = {n: p.detach().clone() for n, p in t.model.named_parameters() if n not in adapters}
    groups = [make_group(g, vocab=vocab(model_dir)) for g in range(2)]
    kls = [t.train_step(groups)["kl_ref"] for _ in range(4)]
    assert kls[0] < 1e-8 and kls[-1] > 1e-5, kls  # B = 0 at first: policy == base
    for n, p in t.model.named_parameters():
        if n in base:
            assert torch.equal(p, base[n]), n  # the base is frozen
    moments = [s for s in t.optimizer.state.values() if s]
    assert len(moments) == len(adapters)  # optimizer state for the adapters alone


def test_resume_from_an_adapter_checkpoint_matches_a_straight_run(
    model_dir: Path, tmp_path: Path, trainers: list[Trainer]
) -> None:
    v = vocab(model_dir)
    batches = [[make_group(g, vocab=v, seed=s) for g in range(2)] for s in range(4)]
    cfg = learn_config(model_dir, tmp_path, lora=LORA, max_steps=4)
    straight = Trainer(cfg)
    for b in batches:
        straight.train_step(b)
    want = {n: p.detach().clone() for n, p in straight.model.named_parameters()}
    straight.close()
    first = Trainer(cfg)
    for b in batches[:2]:
        first.train_step(b)
    path = save_checkpoint(first, cfg.checkpoint.dir)
    first.close()
    full = learn_config(model_dir, tmp_path / "full", max_steps=4)
    whole = Trainer(full)
    trainers.append(whole)
    whole_path = save_checkpoint(whole, full.checkpoint.dir)
    size = sum(f.stat().st_size for f in (path / "dist").rglob("*") if f.is_file())
    whole_size = sum(f.stat().st_size for f in (whole_path / "dist").rglob("*") if f.is_file())
    assert size < whole_size / 4, (size, whole_size)  # adapters and their moments alone
    second = Trainer(cfg)
    trainers.append(second)
    load_checkpoint(second, path)
    assert second.step == 2
    for b in batches[2:]:
        second.train_step(b)
    for name, tensor in second.model.named_parameters():
        torch.testing.assert_close(tensor, want[name], rtol=1e-5, atol=1e-6, msg=name)
    # a resume whose adapters would mean something else is refused before anything loads
    with pytest.raises(ValueError, match=r"holds full weights; this run asks for LoRA adapters"):
        load_checkpoint(second, whole_path)
    other = learn_config(model_dir, tmp_path / "o", lora={**LORA, "alpha": 16.0}, max_steps=4)
    trainers.append(third := Trainer(other))
    with pytest.raises(ValueError, match=r"'alpha': 8.0.*'alpha': 16.0.*must match"):
        load_checkpoint(third, path)


def test_hf_export_folds_the_adapters_in(
    model_dir: Path, tmp_path: Path, trainers: list[Trainer]
) -> None:
    from transformers import AutoModelForCausalLM

    v = vocab(model_dir)
    cfg = learn_config(model_dir, tmp_path, lora=LORA)
    t = Trainer(cfg)
    trainers.append(t)
    for _ in range(3):
        t.train_step([make_group(g, vocab=v) for g in range(2)])
    path = save_checkpoint(t, cfg.checkpoint.dir)
    hf = AutoModelForCausalLM.from_pretrained(str(path / "hf"), dtype=torch.float32).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    labels = torch.tensor([[6, 7, 8, 9, 10, 11]])
    pos = torch.arange(6)[None]
    ours = lm.token_logprobs(t.model, ids, pos, labels, 1.0, vocab_size=v).detach()
    theirs = torch.log_softmax(hf(ids).logits.float(), -1).gather(-1, labels[..., None])[..., 0]
    torch.testing.assert_close(theirs.detach(), ours, atol=1e-4, rtol=1e-4)
    with lora.adapters_disabled(t.model):
        base = lm.token_logprobs(t.model, ids, pos, labels, 1.0, vocab_size=v).detach()
    assert not torch.allclose(base, ours, atol=1e-5)  # the adapters moved it
    # the PEFT folder: the base plus alpha / r * B A per projection is the merged export
    from safetensors.torch import load_file

    config = json.loads((path / "adapter" / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"]) == (4, 8.0)
    assert Path(config["base_model_name_or_path"]) == model_dir.resolve()
    adapters = load_file(str(path / "adapter" / "adapter_model.safetensors"))
    merged, base_sd = hf.state_dict(), load_file(str(model_dir / "model.safetensors"))
    for name, a in adapters.items():
        if ".lora_A." not in name:
            continue
        b = adapters[name.replace(".lora_A.", ".lora_B.")]
        weight = name.removeprefix("base_model.model.").replace(".lora_A.weight", ".weight")
        torch.testing.assert_close(merged[weight], base_sd[weight] + 2.0 * b @ a, msg=weight)
