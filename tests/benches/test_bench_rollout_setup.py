"""The full rollout bench runs a trained policy under the settings it was trained with: the train
config's prompt, format, sampling, turn cap and env options (a policy prompted otherwise would
write garbage and the bench would measure that). No vLLM here: only the configs it builds."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

from agentgym_rl.config.loader import load_config
from agentgym_rl.config.train import TrainConfig

BENCHES = Path(__file__).resolve().parents[2] / "benches"


def bench() -> ModuleType:
    if str(BENCHES) not in sys.path:  # as when it runs: its `figures` beside it
        sys.path.insert(0, str(BENCHES))
    spec = importlib.util.spec_from_file_location("bench_rollout", BENCHES / "bench_rollout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def args(**given: object) -> argparse.Namespace:
    defaults = {
        "model": None,
        "warmup_steps": 200,
        "group_size": 4,
        "groups_per_step": 4,
        "max_in_flight": 16,
        "turns": None,
        "max_tokens": None,
        "config": BENCHES.parent / "configs" / "train" / "babyai_goto.yaml",
        "dtype": None,
    }
    return argparse.Namespace(**{**defaults, **given})


def test_full_form_runs_the_policy_under_its_train_config(tmp_path: Path) -> None:
    b = bench()
    train = load_config(TrainConfig, b.TRAIN_CONFIG)
    setup = b.policy_setup(tmp_path, args(model=tmp_path / "policy"))
    assert setup.model == tmp_path / "policy"
    assert setup.sampling_args == {}  # no output constraint on a trained policy
    assert setup.server_args == train.env_servers[0].args
    assert "observation=compact" in setup.server_args
    config = b.mode_config(setup, ["http://127.0.0.1:1"], args(), tmp_path, "tcp://127.0.0.1:1")
    trained = train.rollout
    env = config.envs[0]
    assert env.system_prompt == trained.envs[0].system_prompt
    assert env.action_format == trained.envs[0].action_format
    assert config.engine.temperature == trained.engine.temperature == 0.7
    assert config.engine.max_tokens_per_turn == trained.engine.max_tokens_per_turn == 24
    assert config.engine.max_model_len == trained.engine.max_model_len == 2048
    assert config.scaling_inter.turn_caps == trained.scaling_inter.turn_caps
    assert trained.dataset is not None
    assert Path(config.dataset.mix[0].split).name == trained.dataset.mix[0].split.name
    assert config.eval is None and config.weights_endpoint is None
    # the bench's own buffer: no admission limit, every group counted
    assert config.buffer.max_staleness >= 1000 and not config.buffer.filter_zero_variance


def test_full_form_takes_another_train_config_and_dtype(tmp_path: Path) -> None:
    """bench_model.py plays SmolLM2 under its own config, in float32 on hosts without bf16."""
    b = bench()
    smollm2 = b.ROOT / "configs/train/babyai_goto_smollm2.yaml"
    train = load_config(TrainConfig, smollm2)
    assert train.rollout.engine.dtype == "bfloat16"  # what the override must change
    given = args(model=tmp_path / "policy", config=smollm2, dtype="float32")
    setup = b.policy_setup(tmp_path, given)
    config = b.mode_config(setup, ["http://127.0.0.1:1"], given, tmp_path, "tcp://127.0.0.1:1")
    assert config.engine.dtype == "float32"
    assert config.envs[0].system_prompt == train.rollout.envs[0].system_prompt
    assert config.engine.kv_cache_mb == train.rollout.engine.kv_cache_mb


def test_full_form_prefers_the_trained_checkpoint(tmp_path: Path) -> None:
    b = bench()
    train = load_config(TrainConfig, b.TRAIN_CONFIG).model_copy(
        update={"run_dir": tmp_path / "run", "model": tmp_path / "base"}
    )
    for step, complete in ((50, True), (60, True), (70, False)):  # 70: an interrupted save
        hf = tmp_path / "run" / "checkpoints" / f"step_{step}" / "hf"
        hf.mkdir(parents=True)
        (hf / "config.json").write_text("{}")
        if complete:
            (hf.parent / "COMPLETE").write_text("ok")
    assert b.choose_policy(train, args()) == tmp_path / "run/checkpoints/step_60/hf"
    assert b.choose_policy(train, args(model=tmp_path / "x")) == tmp_path / "x"
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "config.json").write_text("{}")
    empty = train.model_copy(update={"run_dir": tmp_path / "none"})
    assert b.choose_policy(empty, args()) == tmp_path / "base"


def test_engine_idle_is_split_into_the_steady_state_and_the_drain(tmp_path: Path) -> None:
    """Before the first token the engine is starting, after the last group's dispatch the run
    drains (nothing new to start): the steady state is in between."""
    records = [
        {"uptime_s": 1, "engine_idle_ratio": 1.0, "generated_tokens": 0, "buffer": {"admitted": 4}},
        {"uptime_s": 2, "engine_idle_ratio": 0.1, "generated_tokens": 5, "buffer": {"admitted": 6}},
        {"uptime_s": 3, "engine_idle_ratio": 0.3, "generated_tokens": 9, "buffer": {"admitted": 8}},
        {
            "uptime_s": 5,
            "engine_idle_ratio": 0.9,
            "generated_tokens": 12,
            "buffer": {"admitted": 8},
        },
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    whole, steady = bench().idle_ratio(path, groups=8)
    assert whole == pytest.approx((1.0 + 0.1 + 0.3 + 2 * 0.9) / 5)
    assert steady == pytest.approx((0.1 + 0.3) / 2)


def test_the_steady_rate_counts_episodes_from_the_first_token_to_the_last_dispatch(
    tmp_path: Path,
) -> None:
    records = [
        {"uptime_s": 1, "episodes": 0, "generated_tokens": 0, "buffer": {"admitted": 4}},
        {"uptime_s": 2, "episodes": 3, "generated_tokens": 5, "buffer": {"admitted": 6}},
        {"uptime_s": 4, "episodes": 9, "generated_tokens": 9, "buffer": {"admitted": 8}},
        {"uptime_s": 9, "episodes": 12, "generated_tokens": 12, "buffer": {"admitted": 8}},
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert bench().steady_episodes_per_s(path, groups=8) == pytest.approx(9 / 3)
    assert bench().steady_episodes_per_s(path, groups=99) == pytest.approx(12 / 8)


def test_a_window_where_no_episode_finished_has_no_steady_rate(tmp_path: Path) -> None:
    """Every group dispatched before the first episode finished (the quick form): no steady
    state to measure, so no rate, rather than a zero that reads as a stalled engine."""
    records = [
        {"uptime_s": 1, "episodes": 0, "generated_tokens": 0, "buffer": {"admitted": 2}},
        {"uptime_s": 2, "episodes": 0, "generated_tokens": 5, "buffer": {"admitted": 4}},
        {"uptime_s": 6, "episodes": 16, "generated_tokens": 90, "buffer": {"admitted": 4}},
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert math.isnan(bench().steady_episodes_per_s(path, groups=4))
    assert bench().steady_episodes_per_s(path, groups=99) == pytest.approx(16 / 5)
