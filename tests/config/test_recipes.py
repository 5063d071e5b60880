"""The paper recipes under configs/recipes/<env>/{rollout,learn}/<model>.yaml: every file loads
and validates (schema only: the model directories need not exist here), every environment the
project can drive has one, and each rollout/learn pair agrees with itself and with the paper's
settings (docs/recipes.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym_rl.config import (
    LearnConfig,
    RolloutConfig,
    load_learn_config,
    load_rollout_config,
)

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "configs" / "recipes"
FILES = sorted(RECIPES.rglob("*.yaml"))
PAIRS = sorted({(p.parents[1].name, p.stem) for p in FILES})

# From ../shared/notes/agentgym.md (the reference's scripts where they differ from the paper):
# env -> (group size, batch, ScalingInter stages, versions per stage, prompt + response tokens)
PAPER = {
    "babyai": (8, 32, [6, 13, 20], 100, 512 + 8192),
    "textcraft": (8, 32, [10, 20, 30], 100, 512 + 10240),
    "sciworld": (8, 16, [10, 20, 30], 100, 1024 + 8192),
    "searchqa": (4, 32, [5, 8, 10], 100, 1024 + 8192),
    "webarena": (4, 32, [8, 12, 15], 80, 750 + 14098),
}
# model file stem -> (HF directory name, KV heads: tensor parallelism may not exceed them)
MODELS = {"qwen2.5-3b": ("Qwen2.5-3B-Instruct", 2), "qwen2.5-7b": ("Qwen2.5-7B-Instruct", 4)}


def load_pair(env: str, model: str) -> tuple[RolloutConfig, LearnConfig]:
    return (
        load_rollout_config(RECIPES / env / "rollout" / f"{model}.yaml"),
        load_learn_config(RECIPES / env / "learn" / f"{model}.yaml"),
    )


def port(endpoint: str) -> str:
    return endpoint.rsplit(":", 1)[1]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(RECIPES)))
def test_every_recipe_validates_and_documents_itself(path: Path) -> None:
    side = path.parent.name
    assert side in ("rollout", "learn"), f"{path}: expected <env>/rollout|learn/<model>.yaml"
    config = load_rollout_config(path) if side == "rollout" else load_learn_config(path)
    assert isinstance(config, RolloutConfig | LearnConfig)
    header = path.read_text().split("\nmodel:")[0]
    for needed in ("Reproduces:", "Hardware:", "Launch", "serve-rollouts", "torchrun", "--config"):
        assert needed in header, f"{path}: the header comment lacks {needed!r}"
    assert all(line.startswith("#") for line in header.splitlines()), path
    # The pair shares one secret file, made once with `agentgym-rl secret` (split clusters
    # refuse to start unsigned on addresses beyond the host).
    assert config.auth.secret_file == Path("runs/cluster-secret")
    assert not config.auth.allow_unauthenticated
    assert "agentgym-rl secret runs/cluster-secret" in header


def test_every_environment_has_a_recipe() -> None:
    envs = {env for env, _ in PAIRS}
    drivable = {"babyai", "textcraft", "sciworld", "searchqa", "webarena"}  # the paper's families
    assert drivable <= envs, f"no recipe for {sorted(drivable - envs)}"
    assert set(PAPER) == envs


@pytest.mark.parametrize(("env", "model"), PAIRS, ids=lambda v: str(v))
def test_pairs_agree_with_each_other_and_the_paper(env: str, model: str) -> None:
    rollout, learn = load_pair(env, model)
    group, batch, stages, per_stage, context = PAPER[env]
    hf_name, kv_heads = MODELS[model]
    # the same local model directory on both sides
    assert Path(rollout.model) == learn.model and learn.model.name == hf_name
    # wiring: each side's endpoint is the other's bind, by port
    assert [port(e) for e in rollout.learner.endpoints] == [port(learn.receive.bind)]
    assert learn.weights is not None and rollout.weights_endpoint is not None
    assert port(rollout.weights_endpoint) == port(learn.weights.endpoint)
    # log-probs are compared at one temperature; staleness is bounded alike on both sides
    assert rollout.engine.temperature == learn.temperature == 1.0
    assert rollout.buffer.max_staleness == learn.max_staleness
    # each rollout server admits its share of a step; the learner's credits match that share
    share = rollout.buffer.groups_per_step
    assert learn.groups_per_step % share == 0 and learn.receive.window == share
    # the paper's settings
    assert rollout.dataset.envs == [env] and rollout.dataset.group_size == group
    assert learn.groups_per_step == batch
    assert rollout.scaling_inter.turn_caps == stages
    assert rollout.scaling_inter.versions_per_stage == per_stage
    assert learn.max_steps >= per_stage * len(stages)  # the last stage is reached
    assert rollout.engine.max_model_len == context
    assert learn.optimizer.lr == 1e-6 and learn.optimizer.decay == "constant"
    assert learn.loss.kl_coef == 1e-3 and learn.advantage.estimator == "grpo"
    assert learn.parallel.tp <= kv_heads and kv_heads % learn.parallel.tp == 0


@pytest.mark.parametrize(
    "path", sorted(RECIPES.glob("*/rollout/*.yaml")), ids=lambda p: str(p.relative_to(RECIPES))
)
def test_every_rollout_recipe_has_a_tools_variant(path: Path) -> None:
    """The override each header names puts the env in tool mode; the env declares its own tools,
    and a Qwen2.5-shaped template (the golden fixture's) is read as the Hermes family."""
    from agentgym_rl.config import ActionFormat
    from agentgym_rl.episode.tools import ToolFamily, tool_reader
    from agentgym_rl.trajectory import ChatTokenizer

    override = "envs.0.action_format=tools"
    assert override in path.read_text()
    config = load_rollout_config(path, [override])
    [env] = config.envs
    assert env.action_format is ActionFormat.TOOLS
    qwen = ChatTokenizer.from_dir(ROOT / "tests" / "fixtures" / "templates" / "qwen25_tools")
    reader = tool_reader(env.env, qwen, env.tool_parser)
    assert reader.family is ToolFamily.HERMES and reader.tools.names != ["act"]
