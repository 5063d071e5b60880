"""VllmEngine on a tiny local Qwen2: token-in/token-out, processed logprobs, live updates."""

from __future__ import annotations

import asyncio
import math

import pytest

from agentgym_rl.config.rollout import EngineConfig
from agentgym_rl.inference.engine import EngineOptions, StaleVersionError, VllmEngine
from vllm_fixtures import EngineHandle

pytestmark = pytest.mark.engine

PROMPT = [1, 20, 31, 42, 53, 64]
SETTINGS = ("max_model_len", "temperature", "top_p", "seed", "dtype", "gpu_memory_utilization")


def test_options_are_the_engine_configs_settings() -> None:
    """The sampling and context settings and their defaults are `EngineConfig`'s (max_model_len
    None: the model's own); `from_config` copies them and takes the engine's own knobs."""
    defaults, options = EngineConfig(), EngineOptions()
    assert options.max_model_len is None
    assert {k: getattr(options, k) for k in SETTINGS} == {k: getattr(defaults, k) for k in SETTINGS}
    config = EngineConfig(
        max_model_len=1024,
        temperature=0.7,
        top_p=0.9,
        seed=3,
        dtype="float32",
        gpu_memory_utilization=0.5,
    )
    options = EngineOptions.from_config(config, max_num_seqs=8)
    assert {k: getattr(options, k) for k in SETTINGS} == {k: getattr(config, k) for k in SETTINGS}
    assert options.max_num_seqs == 8


def test_generation_shapes_and_stop(vllm_engine: EngineHandle) -> None:
    eng = vllm_engine.engine

    async def batch() -> list:
        return await asyncio.gather(
            *[
                eng.generate([*PROMPT, i], max_tokens=64, request_id=f"shape-{i}", seed=i)
                for i in range(32)
            ]
        )

    gens = vllm_engine.run(batch())
    assert eng.logprobs_mode == "processed_logprobs"
    assert 2 in eng.stop_token_ids  # <|im_end|>
    for g in gens:
        assert len(g.token_ids) == len(g.logprobs) == len(g.versions) > 0
        assert all(math.isfinite(lp) and lp <= 0.0 for lp in g.logprobs)
        assert set(g.versions) == {eng.version}
        assert g.finish_reason in ("stop", "length")
        if g.finish_reason == "stop":
            assert g.token_ids[-1] in eng.stop_token_ids
            assert not set(g.token_ids[:-1]) & set(eng.stop_token_ids)
        else:
            assert len(g.token_ids) == 64
    # Untrained model: <|im_end|> has p ~ 1/320 per token, so 32 seeded requests of 64 tokens
    # end both ways (deterministically, given the seeds).
    assert {g.finish_reason for g in gens} == {"stop", "length"}


def test_logprobs_are_processed_and_match_transformers(vllm_engine: EngineHandle) -> None:
    eng = vllm_engine.engine
    g = vllm_engine.run(
        eng.generate(PROMPT, max_tokens=40, request_id="lp", seed=7, ignore_eos=True)
    )
    ref = vllm_engine.reference_logprobs(PROMPT, g.token_ids)
    assert max(abs(a - b) for a, b in zip(g.logprobs, ref, strict=True)) < 1e-4
    # Raw (temperature-free) log-probs differ: the engine reports the sampled distribution.
    raw = _raw_logprobs(vllm_engine, PROMPT, g.token_ids)
    assert max(abs(a - b) for a, b in zip(g.logprobs, raw, strict=True)) > 1e-2


def _raw_logprobs(handle: EngineHandle, prompt: list[int], gen: list[int]) -> list[float]:
    import torch

    model = handle._reference
    with torch.no_grad():
        logits = model(torch.tensor([prompt + gen])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    return [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(gen)]


def test_the_kv_cache_is_reported_in_tokens(vllm_engine: EngineHandle) -> None:
    """What `buffer.in_flight: auto` bounds its batch by: the running engine's cache bytes over a
    token's keys and values in every layer, less what vLLM keeps back (whole blocks). The
    arithmetic is written out here on purpose, apart from `inference/kv_cache.py`'s."""
    import json

    options = vllm_engine.engine.options
    assert options.dtype == "float32"  # the fixture's engine: 4 bytes a value
    config = json.loads((vllm_engine.model_dir / "config.json").read_text())
    per_token = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * 4
    per_token *= config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    most = options.kv_cache_memory_bytes // per_token
    tokens = vllm_engine.engine.kv_cache_tokens
    assert tokens is not None and 0.9 * most <= tokens <= most, (tokens, most)


def test_seeded_generation_is_reproducible(vllm_engine: EngineHandle) -> None:
    eng = vllm_engine.engine
    a = vllm_engine.run(eng.generate(PROMPT, max_tokens=24, request_id="s1", seed=3))
    b = vllm_engine.run(eng.generate(PROMPT, max_tokens=24, request_id="s2", seed=3))
    assert a.token_ids == b.token_ids


def test_per_request_temperature_zero_is_greedy(vllm_engine: EngineHandle) -> None:
    """Evaluation's override: temperature 0 takes the argmax at every step, whatever the seed."""
    import torch

    eng = vllm_engine.engine
    kw = {"max_tokens": 12, "ignore_eos": True, "temperature": 0.0}
    a = vllm_engine.run(eng.generate(PROMPT, request_id="g1", seed=1, **kw))
    b = vllm_engine.run(eng.generate(PROMPT, request_id="g2", seed=2, **kw))
    assert a.token_ids == b.token_ids and len(a.token_ids) == 12
    vllm_engine.reference_logprobs(PROMPT, a.token_ids)  # loads the transformers reference
    with torch.no_grad():
        logits = vllm_engine._reference(torch.tensor([list(PROMPT) + a.token_ids])).logits[0]
    steps = logits[len(PROMPT) - 1 : len(PROMPT) - 1 + 12].float()
    top2 = steps.topk(2, dim=-1)
    for i, tok in enumerate(a.token_ids):
        if float(top2.values[i, 0] - top2.values[i, 1]) > 1e-3:  # not a near-tie
            assert tok == int(top2.indices[i, 0])


def test_stop_strings_end_a_turn_after_the_string(vllm_engine: EngineHandle) -> None:
    """A turn given stop strings ends at the first token whose text completes one (kept), with
    the sampled ids unchanged: a prefix of the same greedy turn without them."""
    from transformers import AutoTokenizer

    eng = vllm_engine.engine
    tok = AutoTokenizer.from_pretrained(str(vllm_engine.model_dir))
    kw = {"max_tokens": 16, "ignore_eos": True, "temperature": 0.0}
    full = vllm_engine.run(eng.generate(PROMPT, request_id="st0", **kw)).token_ids
    stop = next(s for s in (tok.decode(full[i : i + 1]).strip() for i in range(6, 16)) if s)
    cut = vllm_engine.run(eng.generate(PROMPT, request_id="st1", stop=[stop], **kw))
    first = next(k for k in range(1, 17) if stop in tok.decode(full[:k]))
    assert cut.finish_reason == "stop"
    assert cut.token_ids == full[:first] and len(cut.logprobs) == first


def test_update_mid_generation_straddles_versions(vllm_engine: EngineHandle) -> None:
    eng = vllm_engine.engine
    old_weights = dict(vllm_engine.weights)
    old_v = eng.version
    new_v = old_v + 1
    new_weights = vllm_engine.perturbed(seed=11, scale=0.1)
    before = vllm_engine.run(eng.generate(PROMPT, max_tokens=32, request_id="pre", seed=5))

    async def straddle() -> tuple:
        started = asyncio.Event()

        def progress(n: int) -> None:
            if n >= 16:
                started.set()

        task = asyncio.create_task(
            eng.generate(
                PROMPT,
                max_tokens=400,
                request_id="long",
                seed=9,
                ignore_eos=True,
                on_tokens=progress,
            )
        )
        await started.wait()
        seconds = await eng.update_weights(new_v, new_weights)
        return await task, seconds

    gen, seconds = vllm_engine.run(straddle())
    vllm_engine.committed(new_v, new_weights)
    assert seconds < 30
    assert len(gen.token_ids) == 400 and gen.finish_reason == "length"
    assert gen.versions[0] == old_v and gen.versions[-1] == new_v
    switch = gen.versions.index(new_v)
    assert 16 <= switch < 400
    assert gen.versions == [old_v] * switch + [new_v] * (400 - switch)
    # Tokens before the switch were sampled by the old weights (exactly their log-probs) ...
    ref_old = vllm_engine.reference_logprobs(PROMPT, gen.token_ids, old_weights)
    head = [abs(a - b) for a, b in zip(gen.logprobs[:switch], ref_old[:switch], strict=True)]
    assert max(head) < 1e-4
    # ... and those after it by the new ones. clear_cache_on_update (default) drops the KV
    # computed by the old weights, so the tail equals a full recompute under the new weights.
    tail = [abs(a - b) for a, b in zip(gen.logprobs[switch:], ref_old[switch:], strict=True)]
    assert max(tail) > 1e-2
    ref_new_full = vllm_engine.reference_logprobs(PROMPT, gen.token_ids, new_weights)
    tail_new = zip(gen.logprobs[switch:], ref_new_full[switch:], strict=True)
    assert max(abs(a - b) for a, b in tail_new) < 1e-3  # fp32 drift over 400 positions
    # The same seeded request now samples from the new policy.
    after = vllm_engine.run(eng.generate(PROMPT, max_tokens=32, request_id="post", seed=5))
    assert after.versions == [new_v] * len(after.token_ids)
    n = min(len(before.logprobs), len(after.logprobs))
    assert before.logprobs[:n] != after.logprobs[:n]
    ref_new = vllm_engine.reference_logprobs(PROMPT, after.token_ids)
    assert max(abs(a - b) for a, b in zip(after.logprobs, ref_new, strict=True)) < 1e-4


def test_old_or_equal_version_rejected(vllm_engine: EngineHandle) -> None:
    eng: VllmEngine = vllm_engine.engine
    probe = vllm_engine.run(eng.generate(PROMPT, max_tokens=16, request_id="r0", seed=1))
    rejected = eng.updates_rejected
    for version in (eng.version, eng.version - 1):
        with pytest.raises(StaleVersionError):
            vllm_engine.run(eng.update_weights(version, vllm_engine.perturbed(seed=99, scale=1.0)))
    assert eng.updates_rejected == rejected + 2
    again = vllm_engine.run(eng.generate(PROMPT, max_tokens=16, request_id="r1", seed=1))
    assert again.token_ids == probe.token_ids and again.logprobs == probe.logprobs


@pytest.mark.parametrize("eager", [True, False])
def test_the_cpu_engine_core_waits_passively_and_an_eager_one_compiles_nothing(
    eager: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While vLLM spawns its engine core (which reads them at start), OpenMP waits passively and
    an eager engine has dynamo off; a setting the user made is kept, and ours are gone after,
    so nothing else this process starts inherits them. (Read back from the engine core's
    /proc environ they cannot be: its renaming overwrites that memory.)"""
    import os

    from vllm.platforms import current_platform

    from agentgym_rl.inference.engine import cpu_engine_environment

    if not current_platform.is_cpu():
        pytest.skip("the settings are CPU-only")
    monkeypatch.delenv("TORCHDYNAMO_DISABLE", raising=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the user's
    with cpu_engine_environment(EngineOptions(enforce_eager=eager)):
        assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
        assert os.environ.get("TORCHDYNAMO_DISABLE") == ("1" if eager else None)
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE" and "TORCHDYNAMO_DISABLE" not in os.environ
    monkeypatch.delenv("OMP_WAIT_POLICY")
    with cpu_engine_environment(EngineOptions(enforce_eager=eager)):
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in os.environ
