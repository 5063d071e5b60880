"""`agentgym-rl eval --model` on a checkpoint the project created (2048 positions): the context
defaults to the model's own, a larger explicit `--max-model-len` is one line and exit 2 before
anything starts, and a vLLM start-up failure is one line naming the model and exit 1. The CLI
runs as a real process; vLLM starts in ~30 s here, so the tests that start it are slow."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym_rl.config.rollout import EngineConfig
from agentgym_rl.config.startup import context_misfit, model_positions
from agentgym_rl.evaluation import EvalError, EvalOptions
from vllm_fixtures import tiny_corpus

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
SPLIT = ROOT / "envs/agentgym_envs/babyai/data/goto_test.json"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agentgym_rl.policy_creation import create_tiny_model

    out = tmp_path_factory.mktemp("eval-context") / "model"
    create_tiny_model(out, corpus=tiny_corpus(), vocab_size=320, seed=0)
    assert json.loads((out / "config.json").read_text())["max_position_embeddings"] == 2048
    return out


def eval_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "agentgym_rl.cli", "eval", "--split", str(SPLIT), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_model_positions_reads_the_config(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"max_position_embeddings": 2048}))
    assert model_positions(tmp_path) == 2048
    assert context_misfit(tmp_path, 2048, "--max-model-len") is None
    assert context_misfit(tmp_path, None, "--max-model-len") is None
    assert "(4096) is larger than the model's context of 2048" in (
        context_misfit(tmp_path, 4096, "--max-model-len") or ""
    )
    cfg.write_text(json.dumps({"text_config": {"max_position_embeddings": 512}}))
    assert model_positions(tmp_path) == 512
    # transformers 5 writes rope_parameters with rope_type "default": no scaling
    cfg.write_text(
        json.dumps({"max_position_embeddings": 1024, "rope_parameters": {"rope_type": "default"}})
    )
    assert model_positions(tmp_path) == 1024
    # A RoPE scaling factor stretches the context: left to vLLM's own derivation.
    scaled = {"max_position_embeddings": 1024, "rope_scaling": {"type": "linear", "factor": 4}}
    cfg.write_text(json.dumps(scaled))
    assert model_positions(tmp_path) is None
    assert context_misfit(tmp_path, 4096, "--max-model-len") is None
    cfg.write_text("{}")
    assert model_positions(tmp_path) is None
    assert model_positions(tmp_path / "missing") is None


def test_options_default_to_the_models_context(tiny_model: Path) -> None:
    EvalOptions(split=[SPLIT], model=tiny_model).check()  # 512 tokens per turn < 2048
    EvalOptions(split=[SPLIT], model=tiny_model, engine=EngineConfig(max_model_len=2048)).check()
    with pytest.raises(EvalError, match=r"--max-model-len \(4096\) is larger than the model's"):
        EvalOptions(
            split=[SPLIT], model=tiny_model, engine=EngineConfig(max_model_len=4096)
        ).check()
    with pytest.raises(EvalError, match=r"must be below the context length \(2048"):
        long_turns = EngineConfig(max_tokens_per_turn=2048)
        EvalOptions(split=[SPLIT], model=tiny_model, engine=long_turns).check()


def test_an_adapter_needs_its_base_and_its_config(tiny_model: Path, tmp_path: Path) -> None:
    with pytest.raises(EvalError, match=r"--adapter needs --model BASE"):
        EvalOptions(split=[SPLIT], api_base="http://x/v1", api_model="m", adapter=tmp_path).check()
    with pytest.raises(EvalError, match=r"no adapter_config.json there"):
        EvalOptions(split=[SPLIT], model=tiny_model, adapter=tmp_path).check()
    (tmp_path / "adapter_config.json").write_text('{"r": 4}')
    EvalOptions(split=[SPLIT], model=tiny_model, adapter=tmp_path).check()


def test_engine_flags_are_the_engine_configs(tiny_model: Path) -> None:
    """eval's engine flags are made from `EngineConfig`: its bounds, its choices (float16
    included), a bad value one line naming the flag, exit 2."""
    for flags, message in (
        (["--temperature", "20"], "eval: --temperature: Input should be less than or equal to 10"),
        (["--top-p", "0"], "eval: --top-p: Input should be greater than 0"),
    ):
        proc = eval_cli("--model", str(tiny_model), *flags, "--no-progress")
        assert proc.returncode == 2 and proc.stderr.splitlines() == [message], proc.stderr
    proc = eval_cli("--model", str(tiny_model), "--dtype", "float16", "--max-model-len", "4096")
    assert proc.returncode == 2 and "--max-model-len (4096)" in proc.stderr  # float16 accepted


def test_too_large_max_model_len_is_one_line_and_exit_2(tiny_model: Path) -> None:
    proc = eval_cli("--model", str(tiny_model), "--max-model-len", "4096", "--no-progress")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        f"eval: --max-model-len (4096) is larger than the model's context of 2048 tokens "
        f"(max_position_embeddings in {tiny_model / 'config.json'}); give --max-model-len <= "
        "2048, or leave it out (the model's own is the default)"
    ]
    assert proc.stdout == ""


@pytest.mark.slow
def test_eval_own_checkpoint_without_max_model_len(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    proc = eval_cli(
        *("--model", str(tiny_model), "--limit", "2", "--n", "1", "--turn-cap", "1"),
        *("--max-tokens-per-turn", "16", "--dtype", "float32", "--concurrency", "2"),
        *("--out", str(out), "--no-progress"),
        timeout=300,
    )
    printed = proc.stdout + proc.stderr
    assert proc.returncode == 0, printed[-4000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    assert "\n| env | category | tasks | Avg@1 | chance | rule | Pass@1 |" in proc.stdout, printed[
        -4000:
    ]
    data = json.loads((out / "eval.json").read_text())
    assert data["meta"]["tasks"] == 2 and len(data["episodes"]) == 2
    assert set(data["statuses"]) <= {"done", "turn_cap", "truncated"}


@pytest.mark.slow
def test_vllm_start_failure_is_one_line_and_exit_1(tiny_model: Path, tmp_path: Path) -> None:
    """A checkpoint vLLM refuses (an architecture it does not know): no traceback from this
    project, the last stderr line names the model and the cause; `--verbose` shows vLLM's."""
    bad = tmp_path / "bad"
    shutil.copytree(tiny_model, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg.update(architectures=["NopeForCausalLM"], model_type="nope")
    (bad / "config.json").write_text(json.dumps(cfg))
    args = ("--model", str(bad), "--limit", "1", "--no-progress", "--out", str(tmp_path / "e"))

    proc = eval_cli(*args, timeout=300)
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-4000:]
    assert "Traceback" not in proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"eval: could not start vLLM on {bad}: ValidationError: ")
    assert "model type `nope`" in last

    verbose = eval_cli(*args, "--verbose", timeout=300)
    assert verbose.returncode == 1
    assert "Traceback" in verbose.stderr
    assert verbose.stderr.splitlines()[-1] == last
