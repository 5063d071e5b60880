"""HF <-> Megatron conversion as pure functions (no process group): the name table, round trips
both ways for tp 1, 2 and 4, pipeline stages, the qkv layout."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
import torch
from transformers import PreTrainedModel

from agentgym_rl.learner import convert
from agentgym_rl.learner import model as lm

pytestmark = pytest.mark.engine

TinyHf = Callable[..., PreTrainedModel]
Saved = Callable[[torch.nn.Module], dict[str, torch.Tensor]]


def _spec(hf: PreTrainedModel, tp: int) -> convert.ConvertSpec:
    return convert.ConvertSpec.from_hf(hf.config, tp, lm.padded_vocab_size(998, tp, 8))


def test_every_name_appears_once_in_the_table(
    hf_family: str, tiny_hf: TinyHf, saved_hf_weights: Saved
) -> None:
    """Each HF tensor the model saves is in exactly one row, each Megatron name in one row, and
    the Megatron names are the model's own parameter names."""
    hf = tiny_hf(hf_family, vocab=998, heads=4, kv_heads=2, head_dim=32)
    spec = _spec(hf, 1)
    table = convert.name_table(spec)
    hf_names = Counter(n for rule in table for n in rule.hf)
    assert [n for n, k in hf_names.items() if k > 1] == []
    assert set(hf_names) == set(saved_hf_weights(hf))
    megatron_names = [rule.megatron for rule in table]
    assert len(set(megatron_names)) == len(megatron_names)
    assert set(megatron_names) == set(convert.hf_to_megatron(hf.state_dict(), spec, 0))
    assert ("output_layer.weight" in megatron_names) == (hf_family == "llama")  # untied
    bias = "decoder.layers.1.self_attention.linear_qkv.bias"
    assert (bias in megatron_names) == (hf_family == "qwen2")  # qkv bias


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_pure_round_trip_is_bit_exact(
    hf_family: str, tiny_hf: TinyHf, saved_hf_weights: Saved, tp: int
) -> None:
    """HF -> per-rank Megatron shards -> HF is the identity (also with fewer kv groups than
    ranks, tp 4), and so is Megatron shards -> HF -> Megatron shards."""
    hf = tiny_hf(hf_family, vocab=998, heads=4, kv_heads=2, head_dim=32)
    spec = _spec(hf, tp)
    shards = [convert.hf_to_megatron(hf.state_dict(), spec, r) for r in range(tp)]
    qkv = shards[0]["decoder.layers.0.self_attention.linear_qkv.weight"]
    assert qkv.shape == ((4 + 2 * 2) * 32 // tp, 128)
    back = convert.megatron_to_hf(shards, spec)
    expected = saved_hf_weights(hf)
    assert back.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(back[name], tensor), name
    again = [convert.hf_to_megatron(back, spec, r) for r in range(tp)]
    for shard, shard_again in zip(shards, again, strict=True):
        assert shard.keys() == shard_again.keys()
        for name, tensor in shard.items():
            assert torch.equal(shard_again[name], tensor), name


@pytest.mark.parametrize("pp", [2, 4])
def test_pipeline_stages_round_trip(
    hf_family: str, tiny_hf: TinyHf, saved_hf_weights: Saved, pp: int
) -> None:
    """Whole model -> pp stages (local layer names; tied: the last stage's embedding copy)
    -> whole model, then to HF bit-exact."""
    hf = tiny_hf(hf_family, vocab=998, heads=4, kv_heads=2, head_dim=32, layers=4)
    spec = convert.ConvertSpec.from_hf(hf.config, 1, 1000)
    full = convert.hf_to_megatron(hf.state_dict(), spec, 0)
    stages = [convert.stage_view(full, spec, r, pp) for r in range(pp)]
    per = 4 // pp
    for r, stage in enumerate(stages):
        layers = {int(n.split(".")[2]) for n in stage if n.startswith("decoder.layers.")}
        assert layers == set(range(per))
        assert torch.equal(
            stage["decoder.layers.0.mlp.linear_fc2.weight"],
            full[f"decoder.layers.{r * per}.mlp.linear_fc2.weight"],
        )
        assert ("embedding.word_embeddings.weight" in stage) == (r == 0)
        assert ("decoder.final_layernorm.weight" in stage) == (r == pp - 1)
        assert ("output_layer.weight" in stage) == (r == pp - 1)
    if spec.tied:
        assert torch.equal(
            stages[-1]["output_layer.weight"], full["embedding.word_embeddings.weight"]
        )
    merged = convert.merge_stages(stages, spec)
    assert merged.keys() == full.keys()
    back = convert.megatron_to_hf([merged], spec)
    for name, tensor in saved_hf_weights(hf).items():
        assert torch.equal(back[name], tensor), name
    with pytest.raises(ValueError, match="do not split into 3 pipeline stages"):
        convert.stage_view(full, spec, 0, 3)


def test_qkv_layout_is_grouped(tiny_hf: TinyHf) -> None:
    """Rows of linear_qkv are [q heads of group g, k_g, v_g] per group, as Megatron splits them."""
    hf = tiny_hf("qwen2", heads=4, kv_heads=2, head_dim=32)
    spec = convert.ConvertSpec.from_hf(hf.config, 1, 1000)
    qkv = convert.hf_to_megatron(hf.state_dict(), spec, 0)[
        "decoder.layers.0.self_attention.linear_qkv.bias"
    ]
    attn = hf.model.layers[0].self_attn
    group1 = qkv[128:256]  # group 1: q heads 2 and 3, then k1, then v1
    assert torch.equal(group1[:64], attn.q_proj.bias[64:128])
    assert torch.equal(group1[64:96], attn.k_proj.bias[32:64])
    assert torch.equal(group1[96:], attn.v_proj.bias[32:64])
