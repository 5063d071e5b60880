"""Single-process learner model tests: live-model conversion, logits/log-probs/grads vs HF
(the pure HF <-> Megatron conversion is tested in test_convert.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from learner_fixtures import (
    FAMILIES,
    hf_token_logprobs,
    make_batch,
    saved_hf_weights,
    tiny_hf_model,
)
from megatron.core import parallel_state, tensor_parallel
from transformers import LlamaConfig

from agentgym_rl.learner import convert, cpu_support
from agentgym_rl.learner import model as lm
from agentgym_rl.learner.attention import SdpaAttention

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def parallel() -> Iterator[lm.ParallelLayout]:
    """A one-process Megatron world (tp = pp = dp = 1), torn down after the module."""
    layout = lm.init_parallel(tp=1, pp=1, seed=0)
    yield layout
    lm.shutdown_parallel()


def _megatron(
    hf: torch.nn.Module, vocab_multiple: int = 1
) -> tuple[torch.nn.Module, convert.ConvertSpec]:
    model = lm.build_gpt_model(hf.config, vocab_multiple=vocab_multiple)
    spec = convert.ConvertSpec.from_hf(hf.config, 1, model.vocab_size)
    convert.load_hf_weights(model, hf.state_dict(), spec)
    return model, spec


@pytest.mark.parametrize("family", FAMILIES)
def test_model_round_trip_is_bit_exact(parallel: lm.ParallelLayout, family: str) -> None:
    hf = tiny_hf_model(family)
    model, spec = _megatron(hf, vocab_multiple=128)
    assert model.vocab_size == 1024
    exported = convert.export_hf_weights(model, spec)
    expected = saved_hf_weights(hf)
    assert exported.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(exported[name], tensor), name


@pytest.mark.parametrize("family", FAMILIES)
def test_logits_and_logprobs_match_transformers(parallel: lm.ParallelLayout, family: str) -> None:
    hf = tiny_hf_model(family)
    model, _ = _megatron(hf, vocab_multiple=128)  # 24 padded vocabulary columns
    ids, pos, labels = make_batch(1000)
    with torch.no_grad():
        ref = hf(input_ids=ids).logits
        logits = model(ids, pos, lm.causal_mask(ids.size(1)))
        assert logits.shape == (2, 16, 1024) and model.unpadded_vocab_size == 1000
        torch.testing.assert_close(logits[..., :1000], ref, atol=1e-4, rtol=0)
        for temperature in (1.0, 0.7):
            # the padding is masked by default (model.unpadded_vocab_size)
            got = lm.token_logprobs(model, ids, pos, labels, temperature)
            want = hf_token_logprobs(hf, ids, labels, temperature)
            torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_gradients_match_transformers(parallel: lm.ParallelLayout, family: str) -> None:
    hf = tiny_hf_model(family)
    model, spec = _megatron(hf, vocab_multiple=128)
    ids, pos, labels = make_batch(1000)
    lm.token_logprobs(model, ids, pos, labels, 0.7, vocab_size=1000).mean().backward()
    hf_token_logprobs(hf, ids, labels, 0.7).mean().backward()
    grads = convert.export_hf_grads(model, spec)
    for name, param in hf.named_parameters():
        torch.testing.assert_close(grads[name], param.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_megatron_loss_is_negative_logprob(parallel: lm.ParallelLayout) -> None:
    """Without vocab padding, the `labels=` cross-entropy equals -token_logprobs at T = 1."""
    hf = tiny_hf_model("qwen2")
    model, _ = _megatron(hf)
    ids, pos, labels = make_batch(1000)
    with torch.no_grad():
        loss = lm.per_token_loss(model, ids, pos, labels)
        logprobs = lm.token_logprobs(model, ids, pos, labels, 1.0)
    assert loss.shape == (2, 16)
    torch.testing.assert_close(loss, -logprobs, atol=1e-6, rtol=0)


def test_rejects_unsupported_inputs(parallel: lm.ParallelLayout) -> None:
    hf = tiny_hf_model("qwen2")
    model, _ = _megatron(hf)
    ids, pos, labels = make_batch(1000)
    with pytest.raises(ValueError, match="position_ids"):
        lm.token_logprobs(model, ids, pos + 1, labels, 1.0)
    with pytest.raises(ValueError, match="temperature"):
        lm.token_logprobs(model, ids, pos, labels, 0.0)
    with pytest.raises(NotImplementedError, match="attention_bias"):
        lm.transformer_config_from_hf(LlamaConfig(attention_bias=True))


def test_transformer_config_mapping() -> None:
    hf = tiny_hf_model("qwen2", heads=4, kv_heads=2, head_dim=32)
    cfg = lm.transformer_config_from_hf(hf.config, tp=2)
    assert (cfg.num_query_groups, cfg.kv_channels, cfg.ffn_hidden_size) == (2, 32, 256)
    assert cfg.normalization == "RMSNorm" and cfg.layernorm_epsilon == 1e-5
    assert cfg.gated_linear_unit and cfg.add_qkv_bias and not cfg.add_bias_linear
    assert not lm.transformer_config_from_hf(tiny_hf_model("llama").config).add_qkv_bias
    assert cfg.bias_activation_fusion  # Megatron's fused SwiGLU unless turned off
    assert not lm.transformer_config_from_hf(hf.config, fused_swiglu=False).bias_activation_fusion
    assert lm.padded_vocab_size(1001, 2) == 1002
    assert lm.padded_vocab_size(1000, 2, 128) == 1024


@pytest.mark.skipif(not cpu_support.cpu_mode(), reason="CPU substitutions apply without CUDA")
def test_cpu_substitutions(parallel: lm.ParallelLayout) -> None:
    buffer = parallel_state.get_global_memory_buffer()
    assert isinstance(buffer, cpu_support.CpuMemoryBuffer)
    assert buffer.get_tensor((2, 3), torch.float32, "t").device.type == "cpu"

    tracker = tensor_parallel.get_cuda_rng_tracker()
    assert isinstance(tracker, cpu_support.CpuRNGStatesTracker)
    outer = torch.get_rng_state()
    with tracker.fork():
        first = torch.rand(4)
    assert torch.equal(torch.get_rng_state(), outer)  # caller's stream untouched
    with tracker.fork():
        second = torch.rand(4)
    assert not torch.equal(first, second)  # the forked stream advanced
    with tracker.fork("never-added"):  # no state of that name: a plain block
        torch.rand(1)


def _torch_entropy(logits: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(logits.double(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


@pytest.mark.parametrize("family", FAMILIES)
def test_logprobs_and_entropy_match_transformers(parallel: lm.ParallelLayout, family: str) -> None:
    """Entropy of softmax(logits / T) over the real vocabulary (24 padded columns excluded)."""
    hf = tiny_hf_model(family)
    model, _ = _megatron(hf, vocab_multiple=128)
    ids, pos, labels = make_batch(1000)
    temperature = 0.7
    with torch.no_grad():
        want_h = _torch_entropy(hf(input_ids=ids).logits.float() / temperature).float()
        want_lp = hf_token_logprobs(hf, ids, labels, temperature)
        lp, h = lm.token_logprobs_and_entropy(model, ids, pos, labels, temperature)
        alone = lm.token_logprobs(model, ids, pos, labels, temperature)
    assert h.shape == labels.shape and float(h.min()) > 0
    torch.testing.assert_close(h, want_h, atol=1e-5, rtol=0)
    torch.testing.assert_close(lp, want_lp, atol=1e-5, rtol=0)
    assert torch.equal(lp, alone)


def test_vocab_parallel_entropy_value_and_grad(parallel: lm.ParallelLayout) -> None:
    """On a leaf tensor with -inf padding: value and gradient equal torch's, no nan."""
    gen = torch.Generator().manual_seed(3)
    real = (3.0 * torch.randn(3, 5, 40, generator=gen)).requires_grad_(True)
    padded = torch.cat([real, torch.full((3, 5, 8), float("-inf"))], dim=-1)
    got = lm.vocab_parallel_entropy(padded)
    want = _torch_entropy(real).float()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    (g_got,) = torch.autograd.grad(got.sum(), real)
    (g_want,) = torch.autograd.grad(_torch_entropy(real).sum(), real)
    assert torch.isfinite(g_got).all()
    torch.testing.assert_close(g_got, g_want.float(), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_sdpa_attention_matches_megatron_local_attention(
    parallel: lm.ParallelLayout, family: str
) -> None:
    """The fused core attention computes Megatron's DotProductAttention (GQA: 4 heads, 2 kv)."""
    hf = tiny_hf_model(family, heads=4, kv_heads=2, head_dim=32)
    sdpa, spec = _megatron(hf)
    local = lm.build_gpt_model(hf.config, attention="local")
    convert.load_hf_weights(local, hf.state_dict(), spec)
    core = sdpa.decoder.layers[0].self_attention.core_attention
    assert isinstance(core, SdpaAttention) and core.groups == 2 and core.heads == 4
    ids, pos, labels = make_batch(1000, batch=3, seq=24)
    for model in (sdpa, local):
        lm.token_logprobs(model, ids, pos, labels, 0.7).mean().backward()
    with torch.no_grad():
        want = local(ids, pos, lm.causal_mask(24))
        torch.testing.assert_close(sdpa(ids, pos, lm.causal_mask(24)), want, atol=1e-5, rtol=0)
    got_g, want_g = convert.export_hf_grads(sdpa, spec), convert.export_hf_grads(local, spec)
    for name, grad in want_g.items():
        torch.testing.assert_close(got_g[name], grad, atol=1e-6, rtol=1e-4, msg=name)


def test_fused_swiglu_matches_unfused(parallel: lm.ParallelLayout) -> None:
    """Megatron's fused SwiGLU (the default) computes the unfused chunk-silu-multiply."""
    hf = tiny_hf_model("qwen2")
    fused, spec = _megatron(hf)
    plain = lm.build_gpt_model(hf.config, fused_swiglu=False)
    convert.load_hf_weights(plain, hf.state_dict(), spec)
    assert fused.config.bias_activation_fusion and not plain.config.bias_activation_fusion
    ids, pos, labels = make_batch(1000, batch=3, seq=24)
    got, want = (lm.token_logprobs(m, ids, pos, labels, 0.7) for m in (fused, plain))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    got.mean().backward()
    want.mean().backward()
    got_g, want_g = convert.export_hf_grads(fused, spec), convert.export_hf_grads(plain, spec)
    for name, grad in want_g.items():
        torch.testing.assert_close(got_g[name], grad, atol=1e-6, rtol=1e-4, msg=name)


def test_sdpa_right_padding_does_not_leak(parallel: lm.ParallelLayout) -> None:
    """A row's real positions do not depend on what its right padding holds (causal)."""
    hf = tiny_hf_model("qwen2", heads=4, kv_heads=2, head_dim=32)
    model, _ = _megatron(hf)
    ids, pos, labels = make_batch(1000, batch=2, seq=20)
    padded = ids.clone()
    padded[0, 12:] = 0  # row 0: 12 real tokens, then padding
    with torch.no_grad():
        a = lm.token_logprobs(model, padded, pos, labels, 1.0)
        b = lm.token_logprobs(model, ids, pos, labels, 1.0)
        alone = lm.token_logprobs(model, ids[:1, :12], pos[:1, :12], labels[:1, :12], 1.0)
    torch.testing.assert_close(a[0, :12], b[0, :12], atol=1e-6, rtol=0)
    torch.testing.assert_close(a[0, :12], alone[0], atol=1e-6, rtol=0)
    assert not torch.allclose(a[0, 12:], b[0, 12:])


@pytest.mark.parametrize("family", FAMILIES)
def test_fused_logprobs_match_vocab_parallel_path(parallel: lm.ParallelLayout, family: str) -> None:
    """tp == 1 fused log-softmax + gather == Megatron's vocab-parallel CE, values and grads."""
    hf = tiny_hf_model(family)
    model, spec = _megatron(hf, vocab_multiple=128)  # 24 padded columns to exclude
    ids, pos, labels = make_batch(1000)
    results = []
    for fused in (True, False):
        model.zero_grad(set_to_none=True)
        lp, h = lm.token_logprobs_and_entropy(model, ids, pos, labels, 0.7, fused=fused)
        (lp + 0.1 * h).mean().backward()
        results.append((lp.detach(), h.detach(), convert.export_hf_grads(model, spec)))
    (lp_f, h_f, g_f), (lp_v, h_v, g_v) = results
    torch.testing.assert_close(lp_f, lp_v, atol=1e-6, rtol=0)
    torch.testing.assert_close(h_f, h_v, atol=1e-5, rtol=0)
    for name, grad in g_v.items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(g_f[name], grad, atol=1e-7, rtol=1e-4, msg=name)
    with torch.no_grad():
        alone = lm.token_logprobs(model, ids, pos, labels, 0.7)
    assert torch.equal(alone, lp_f)


@pytest.mark.parametrize("fused", [True, False])
def test_head_on_selected_positions_matches_full_head(
    parallel: lm.ParallelLayout, fused: bool
) -> None:
    """`positions` projects only the loss's tokens onto the vocabulary: the same log-probs and
    entropies there, 0 elsewhere, and the same gradients for a loss masked to those positions."""
    hf = tiny_hf_model("llama")
    model, spec = _megatron(hf, vocab_multiple=128)
    ids, pos, labels = make_batch(1000)
    positions = torch.zeros_like(ids, dtype=torch.bool)
    positions[0, 3:7], positions[1, 10:15] = True, True
    results = []
    for chosen in (None, positions):
        model.zero_grad(set_to_none=True)
        lp, h = lm.token_logprobs_and_entropy(
            model, ids, pos, labels, 0.7, fused=fused, positions=chosen
        )
        ((lp + 0.1 * h) * positions).sum().backward()
        results.append((lp.detach(), h.detach(), convert.export_hf_grads(model, spec)))
    (lp_all, h_all, g_all), (lp_sel, h_sel, g_sel) = results
    torch.testing.assert_close(lp_sel[positions], lp_all[positions], atol=1e-6, rtol=0)
    torch.testing.assert_close(h_sel[positions], h_all[positions], atol=1e-5, rtol=0)
    assert not lp_sel[~positions].any() and not h_sel[~positions].any()
    assert lp_all[~positions].ne(0).all()
    for name, grad in g_all.items():  # sums in another order: ~2e-6 apart on values up to ~5
        torch.testing.assert_close(g_sel[name], grad, atol=1e-5, rtol=1e-4, msg=name)
    with torch.no_grad():
        alone = lm.token_logprobs(model, ids, pos, labels, 0.7, fused=fused, positions=positions)
    assert torch.equal(alone, lp_sel)


def test_right_padded_rows_match_unpadded(parallel: lm.ParallelLayout) -> None:
    """Rows of different lengths in one collated batch: the padded row's real-token log-probs
    equal those of the same sequence alone (RoPE by column, padding after the real tokens)."""
    import numpy as np

    from agentgym_rl.learner.batch import collate
    from agentgym_rl.wire import Status, WireGroup, WireSample, WireTokens

    def wire(ids: list[int]) -> WireSample:
        n = len(ids)
        tokens = WireTokens(
            input_ids=np.asarray(ids, dtype=np.uint32),
            loss_mask=np.asarray([0, 0] + [1] * (n - 2), dtype=np.uint8),
            logprobs=np.zeros(n, dtype=np.float32),
            versions=np.zeros(n, dtype=np.uint32),
            turn_spans=np.zeros((0, 2), dtype=np.uint32),
        )
        return WireSample(tokens, 1.0, Status.DONE, False, 1, 4, 0, 0)

    hf = tiny_hf_model("qwen2")
    model, _ = _megatron(hf)
    gen = torch.Generator().manual_seed(5)
    short, long = (torch.randint(3, 1000, (n,), generator=gen).tolist() for n in (5, 11))
    group = WireGroup(0, "t_0", "t", [wire(short), wire(long)])
    batch = collate([group], pad_token_id=0)
    with torch.no_grad():
        padded = lm.token_logprobs(model, batch.input_ids, batch.position_ids, batch.labels, 1.0)
        alone = collate([WireGroup(1, "t_1", "t", [wire(short)])], pad_token_id=0)
        ref = lm.token_logprobs(model, alone.input_ids, alone.position_ids, alone.labels, 1.0)
    torch.testing.assert_close(padded[0, :4], ref[0, :4], atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_bf16_autocast_logprobs_close_to_fp32(parallel: lm.ParallelLayout, family: str) -> None:
    """bf16 forward, fp32 everything after: log-probs within bf16's ~3 significant digits."""
    hf = tiny_hf_model(family)
    model, spec = _megatron(hf)
    ids, pos, labels = make_batch(1000)
    want = lm.token_logprobs(model, ids, pos, labels, 0.7)
    lp, h = lm.token_logprobs_and_entropy(model, ids, pos, labels, 0.7, autocast=torch.bfloat16)
    assert lp.dtype == torch.float32 and h.dtype == torch.float32
    diff = (lp - want).abs()
    # |log p| ~ 7 here; bf16 keeps 8 mantissa bits (relative 4e-3). Measured on these models:
    # mean 1.8e-3, max 6e-3; the bounds leave ~5x room for other CPUs' bf16 kernels.
    assert float(diff.mean()) < 0.01 and float(diff.max()) < 0.03, diff
    assert float(diff.max()) > 0  # the autocast took effect
    lp.mean().backward()
    grads = convert.export_hf_grads(model, spec)
    assert all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads.values())
    assert all(p.dtype == torch.float32 for p in model.parameters())


def _reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, masked: torch.Tensor
) -> torch.Tensor:
    """Plain attention on [s, b, h, d] / [s, b, g, d]; `masked` [b, 1, s, s] True = blocked."""
    rep = q.size(2) // k.size(2)
    k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
    scores = torch.einsum("qbhd,kbhd->bhqk", q, k) / q.size(-1) ** 0.5
    probs = scores.masked_fill(masked, float("-inf")).softmax(dim=-1)
    out = torch.einsum("bhqk,kbhd->qbhd", probs, v)
    return out.reshape(q.size(0), q.size(1), -1)


def test_sdpa_attention_masks(parallel: lm.ParallelLayout) -> None:
    """Causal type: the causal mask is implied (a passed mask is not read); padding type: the
    boolean mask is honoured with Megatron's sign (True = may not attend)."""
    from megatron.core.transformer.enums import AttnMaskType

    config = lm.transformer_config_from_hf(tiny_hf_model("qwen2", heads=4, kv_heads=2).config)
    gen = torch.Generator().manual_seed(5)
    s, b, d = 10, 2, config.kv_channels
    q = torch.randn(s, b, 4, d, generator=gen)
    k, v = (torch.randn(s, b, 2, d, generator=gen) for _ in range(2))
    causal = lm.causal_mask(s)
    padding = torch.rand(b, 1, s, s, generator=gen) < 0.3
    padding[..., 0] = False  # every query may attend somewhere
    for mask_type, passed, want_mask in (
        (AttnMaskType.causal, padding, causal),
        (AttnMaskType.padding, padding, padding),
    ):
        core = SdpaAttention(config, 1, mask_type, "self")
        got = core(q, k, v, passed)
        assert got.shape == (s, b, 4 * d)
        want = _reference_attention(q, k, v, want_mask)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=str(mask_type))
