"""LoRA on the wire: the learner's adapters (PEFT names, B scaled) go to a vLLM engine started
with `max_lora_rank`; each version generates with its own adapters, every token stamped with
it, and the engine's log-probs equal the adapted learner's on the same tokens, whether vLLM
serves the adapters (`lora_serving: adapters`) or the engine merges them into its weights
(`merged`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from agentgym_rl.inference.adapters import lora_engine_args
from agentgym_rl.inference.engine import EngineOptions, VllmEngine
from agentgym_rl.learner import convert, lora
from agentgym_rl.learner import model as lm
from agentgym_rl.learner.trainer import load_hf_state_dict
from agentgym_rl.weights.peft import AdapterError, write_peft_dir
from lora_adapters import adapted
from vllm_fixtures import tiny_corpus

pytestmark = pytest.mark.engine
TEMPERATURE = 0.8
RANK, ALPHA = 4, 8.0
PROMPT = [1, 11, 22, 33, 44]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agentgym_rl.policy_creation import create_tiny_model

    out = tmp_path_factory.mktemp("lora-tiny")
    return create_tiny_model(out, corpus=tiny_corpus(), vocab_size=320, seed=0)


@contextmanager
def started(
    model_dir: Path, serving: str
) -> Iterator[tuple[VllmEngine, asyncio.AbstractEventLoop]]:
    """An engine taking rank-`RANK` adapters as `serving` says, on a loop of its own."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    opts = EngineOptions(
        max_model_len=512, max_num_seqs=8, dtype="float32", temperature=TEMPERATURE,
        max_lora_rank=RANK, lora_serving=serving,
    )  # fmt: skip
    eng = asyncio.run_coroutine_threadsafe(VllmEngine.start(model_dir, opts), loop).result(300)
    try:
        yield eng, loop
    finally:
        eng.shutdown()
        loop.call_soon_threadsafe(loop.stop)


@pytest.fixture(scope="module")
def engine(model_dir: Path) -> Iterator[tuple[VllmEngine, asyncio.AbstractEventLoop]]:
    with started(model_dir, "adapters") as served:
        yield served


def learner_logprobs(
    model: torch.nn.Module, prompt: list[int], tokens: list[int], vocab: int
) -> torch.Tensor:
    ids = torch.tensor([prompt + tokens[:-1]])
    labels = torch.tensor([prompt[1:] + tokens])
    pos = torch.arange(ids.shape[1])[None]
    out = lm.token_logprobs(model, ids, pos, labels, TEMPERATURE, vocab_size=vocab)
    return out[0, len(prompt) - 1 :].detach()


def run(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, loop).result(120)


def adapted_learner(model_dir: Path) -> tuple[torch.nn.Module, dict[str, torch.Tensor], int]:
    """The tiny model on Megatron with non-zero adapters, and what its update carries."""
    from transformers import AutoConfig

    hf = AutoConfig.from_pretrained(str(model_dir))
    model = lm.build_gpt_model(hf, fused_swiglu=False)
    spec = convert.ConvertSpec.from_hf(hf, 1, model.vocab_size)
    convert.load_hf_weights(model, load_hf_state_dict(model_dir), spec)
    update = adapted(model, spec, RANK, ALPHA, scale=0.2)
    return model, update, int(hf.vocab_size)


def test_each_version_generates_with_its_adapters(model_dir: Path, engine: Any) -> None:
    eng, loop = engine
    lm.init_parallel(tp=1, seed=0)
    try:
        model, update, vocab = adapted_learner(model_dir)
        assert all(".lora_A." in n or ".lora_B." in n for n in update)  # no base tensor
        base = run(loop, eng.generate(PROMPT, max_tokens=12, request_id="base", seed=5))
        assert set(base.versions) == {0}
        run(loop, eng.update_weights(1, update))
        got = run(loop, eng.generate(PROMPT, max_tokens=12, request_id="v1", seed=5))
        assert set(got.versions) == {1} and got.token_ids
        ids = torch.tensor([PROMPT + got.token_ids[:-1]])
        labels = torch.tensor([PROMPT[1:] + got.token_ids])
        pos = torch.arange(ids.shape[1])[None]
        ours = lm.token_logprobs(model, ids, pos, labels, TEMPERATURE, vocab_size=vocab)
        learner = ours[0, len(PROMPT) - 1 :].detach()
        torch.testing.assert_close(torch.tensor(got.logprobs), learner, atol=2e-3, rtol=0)
        with lora.adapters_disabled(model):  # the engine's base is the learner's base
            ids0 = torch.tensor([PROMPT + base.token_ids[:-1]])
            lab0 = torch.tensor([PROMPT[1:] + base.token_ids])
            pos0 = torch.arange(ids0.shape[1])[None]
            ref = lm.token_logprobs(model, ids0, pos0, lab0, TEMPERATURE, vocab_size=vocab)
        torch.testing.assert_close(
            torch.tensor(base.logprobs), ref[0, len(PROMPT) - 1 :].detach(), atol=2e-3, rtol=0
        )
        # eval --adapter: the same adapters as a PEFT folder (B unscaled, alpha in its config)
        unscaled = {
            n: t * RANK / ALPHA if n.endswith(".lora_B.weight") else t for n, t in update.items()
        }
        folder = write_peft_dir(model_dir.parent / "peft", unscaled, str(model_dir), alpha=ALPHA)
        eng.serve_adapter(folder)
        again = run(loop, eng.generate(PROMPT, max_tokens=12, request_id="peft", seed=5))
        assert again.token_ids == got.token_ids
        torch.testing.assert_close(torch.tensor(again.logprobs), torch.tensor(got.logprobs))
        mixed = {**update, "model.norm.weight": torch.ones(8)}
        with pytest.raises(AdapterError, match="mixes adapters"):
            run(loop, eng.update_weights(2, mixed))
        # adapters wider than the engine serves (rank 4 asked: vLLM's 8) are refused whole
        wide = {
            n: torch.zeros(16, t.shape[1]) if ".lora_A." in n else torch.zeros(t.shape[0], 16)
            for n, t in update.items()
        }
        with pytest.raises(AdapterError, match="rank 16 arrived; this engine serves up to 8"):
            run(loop, eng.update_weights(2, wide))
        assert eng.version == 1 and eng.adapters is not None and eng.adapters.version == 1
        with pytest.raises(AdapterError, match="vLLM serves ranks up to 512"):
            lora_engine_args(600, 4)
    finally:
        lm.shutdown_parallel()


@contextmanager
def scaled_b(model: torch.nn.Module, scale: float) -> Iterator[None]:
    """The learner's adapters with every B times `scale`, for the block."""
    bs = [p for n, p in model.named_parameters() if n.endswith(".lora_b")]
    kept = [b.detach().clone() for b in bs]
    with torch.no_grad():
        for b in bs:
            b.mul_(scale)
    try:
        yield
    finally:
        with torch.no_grad():
            for b, k in zip(bs, kept, strict=True):
                b.copy_(k)


def test_merged_adapters_generate_as_the_adapted_learner(model_dir: Path, engine: Any) -> None:
    """`lora_serving: merged`: the engine starts without vLLM's LoRA, merges each version into
    the base weights it read from the model folder, and loads them as a full update."""
    eng_adapters, _ = engine  # the module's other engine stays up: one loop each
    with started(model_dir, "merged") as (eng, loop):
        check_merged(model_dir, eng, loop)
    assert eng_adapters.merging is None


def check_merged(model_dir: Path, eng: VllmEngine, loop: asyncio.AbstractEventLoop) -> None:
    """The base, then two versions each merged from it, against the learner; a wider rank."""
    lm.init_parallel(tp=1, seed=0)
    try:
        assert eng.adapters is None and eng.merging is not None
        model, update, vocab = adapted_learner(model_dir)
        base = run(loop, eng.generate(PROMPT, max_tokens=12, request_id="base", seed=5))
        with lora.adapters_disabled(model):
            ref = learner_logprobs(model, PROMPT, base.token_ids, vocab)
        torch.testing.assert_close(torch.tensor(base.logprobs), ref, atol=2e-3, rtol=0)
        for version, scale in ((1, 1.0), (2, -0.5)):  # each merge starts from the base
            scaled = {n: t * scale if ".lora_B." in n else t for n, t in update.items()}
            assert run(loop, eng.update_weights(version, scaled)) > 0
            got = run(loop, eng.generate(PROMPT, max_tokens=12, request_id=f"m{version}", seed=5))
            assert set(got.versions) == {version} and got.token_ids
            with scaled_b(model, scale):
                ours = learner_logprobs(model, PROMPT, got.token_ids, vocab)
            torch.testing.assert_close(torch.tensor(got.logprobs), ours, atol=2e-3, rtol=0)
        wide = {
            n: torch.zeros(16, t.shape[1]) if ".lora_A." in n else torch.zeros(t.shape[0], 16)
            for n, t in update.items()
        }
        with pytest.raises(AdapterError, match="rank 16 arrived; this engine merges up to 4"):
            run(loop, eng.update_weights(3, wide))
        assert eng.version == 2
    finally:
        lm.shutdown_parallel()
