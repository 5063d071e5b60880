"""The torch-free config package: import isolation, shipped YAMLs, overrides, validators."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentgym_rl.config import (
    ActionFormat,
    ConfigError,
    LearnConfig,
    RolloutConfig,
    load_learn_config,
    load_rollout_config,
)
from agentgym_rl.config.loader import apply_override, parse_override

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "configs").rglob("*.yaml"))
MINIMAL = [
    "model=/models/tiny",
    "envs=[{env: babyai, addresses: ['http://127.0.0.1:36001']}]",
    "dataset.env=babyai",
    "dataset.split=envs/agentgym_envs/babyai/data/train.json",
    "learner.endpoints=['tcp://127.0.0.1:5555']",
]


@pytest.mark.process
@pytest.mark.parametrize(
    ("loader", "path", "kind"),
    [
        ("load_rollout_config", "configs/rollout/babyai_tiny.yaml", "RolloutConfig"),
        ("load_learn_config", "configs/learn/babyai_tiny.yaml", "LearnConfig"),
    ],
)
def test_configs_load_without_torch_or_vllm(loader: str, path: str, kind: str) -> None:
    script = textwrap.dedent(
        """
        import sys
        from importlib.abc import MetaPathFinder

        class Blocker(MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {"torch", "vllm", "transformers", "megatron"}:
                    raise ImportError(f"forbidden import: {name}")
                return None

        sys.meta_path.insert(0, Blocker())
        import agentgym_rl.config as c
        print(type(getattr(c, sys.argv[1])(sys.argv[2])).__name__)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script, loader, str(ROOT / path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == kind


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_yaml_parses(
    path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if "studies" in path.parts:  # a study's config with each arm's overrides, planned as train
        if path.name == "arms.yaml":
            monkeypatch.chdir(ROOT)
            _check_study(path.parent, tmp_path)
        return
    if path.parts[-2] == "train":  # composed and checked as `train` would, nothing started
        from agentgym_rl.config.loader import load_config
        from agentgym_rl.config.train import TrainConfig
        from agentgym_rl.supervise import plan_run

        monkeypatch.chdir(ROOT)  # its paths are relative to the repository, as in the README
        # whether this machine's CPU computes bf16 is not the config's concern (the refusal is
        # tests/supervise/test_plan.py's)
        monkeypatch.setattr("agentgym_rl.supervise.preflight.cpu_flags", lambda *a: None)
        # a fresh run folder: one from a local run of this config would be refused
        plan = plan_run(load_config(TrainConfig, path, [f"run_dir={tmp_path / 'run'}"]))
        from agentgym_rl.episode.dataset import load_split

        for rollout in plan.rollout_configs:  # a file, or a split the env declares: each loads
            assert all(load_split(s.split, s.env) for s in rollout.dataset.mix)
            splits = rollout.eval_splits() if rollout.eval is not None else {}
            assert all(load_split(split, env) for env, split in splits.items())
        return
    if path.parts[-2] == "cluster":  # a train config for `launch`, planned on stand-in nodes
        from agentgym_rl.cluster.launch import stand_in
        from agentgym_rl.cluster.slurm_script import batch_script
        from agentgym_rl.config.loader import load_config
        from agentgym_rl.config.train import TrainConfig
        from agentgym_rl.processes.ports import JobPorts
        from agentgym_rl.supervise import plan_run

        model = tmp_path / "model"  # the config names a model only a cluster has
        model.mkdir()
        for name in ("config.json", "tokenizer.json"):
            (model / name).write_text("{}")
        monkeypatch.chdir(ROOT)
        overrides = [f"run_dir={tmp_path / 'run'}", f"model={model}"]
        train = load_config(TrainConfig, path, overrides)
        assert train.cluster is not None
        plan = plan_run(train, placement=stand_in(train), ports=JobPorts(20000, 64))
        assert len(plan.rollouts) == train.rollout_servers
        assert batch_script(train).count("#SBATCH hetjob") == 2
        return
    assert path.parts[-2] in ("rollout", "learn")
    if path.parts[-2] == "learn":
        assert isinstance(load_learn_config(path), LearnConfig)
        return
    config = load_rollout_config(path)
    assert set(config.dataset.envs) <= {e.env for e in config.envs}


def _check_study(folder: Path, tmp_path: Path) -> None:
    """Every arm of the study's arms.yaml composes with its common config (study.yaml, or the
    one arms.yaml names) into a plannable run whose held-out evaluation is the same in every
    arm, at the arm's longest cap or above."""
    import importlib.util

    from agentgym_rl.config.loader import load_config
    from agentgym_rl.config.train import TrainConfig
    from agentgym_rl.supervise import plan_run

    name = "study"
    spec = importlib.util.spec_from_file_location(name, ROOT / f"scripts/{name}.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    sys.modules[name] = script  # its dataclasses look their module up
    spec.loader.exec_module(script)
    study = script.Study.load(folder)
    path = study.config
    assert study.arms and study.seeds and path.is_file(), path
    held_out = set()
    for arm in study.arms.values():
        seeds = [f"{key}=7" for key in script.SEED_KEYS]
        overrides = [f"run_dir={tmp_path / arm.name}", *arm.overrides, *seeds]
        train = load_config(TrainConfig, path, overrides)
        [rollout] = plan_run(train).rollout_configs
        caps = rollout.turn_caps("babyai").turn_caps
        assert rollout.engine.seed == rollout.dataset.shuffle_seed == train.learn.seed == 7
        assert rollout.eval is not None
        eval_cap = rollout.eval.turn_cap or max(caps)  # unset: the run's own (longest) cap
        assert max(caps) <= eval_cap <= max(study.test_turn_caps or [eval_cap])
        held_out.add((str(rollout.eval.split), eval_cap, rollout.eval.limit))
    assert len(held_out) == 1
    if study.decision:  # the decision rung is a category of the held-out split
        [(split, _, _)] = held_out
        rows = json.loads((ROOT / split).read_text())
        assert study.decision["rung"] in {row["category"] for row in rows}


def test_shipped_configs_exist() -> None:
    assert SHIPPED, "no YAML under configs/"


def test_minimal_config_gets_recipe_defaults() -> None:
    config = load_rollout_config(None, MINIMAL)
    assert config.scaling_inter.turn_caps == [6, 13, 20]
    assert config.engine.temperature == 1.0
    assert config.envs[0].action_format is ActionFormat.REACT
    assert config.env_servers("babyai").dialect == "agentgym"


def test_an_envs_http_dialect_is_its_servers_unless_stated() -> None:
    # every client of ours that reaches a web env server over HTTP speaks its dialect
    names = ["babyai", "searchqa", "webarena", "miniwob", "sciworld"]
    listed = ", ".join(
        f"{{env: {e}, addresses: ['http://h:{9000 + i}']}}" for i, e in enumerate(names)
    )
    config = load_rollout_config(None, [*MINIMAL, f"envs=[{listed}]"])
    dialects = {e.env: e.dialect for e in config.envs}
    assert dialects == {
        "babyai": "agentgym",
        "searchqa": "searchqa",
        "webarena": "webarena",
        "miniwob": "webarena",
        "sciworld": "agentgym",
    }
    stated = load_rollout_config(None, [*MINIMAL, "envs.0.dialect=searchqa"])
    assert stated.env_servers("babyai").dialect == "searchqa"


def test_overrides_apply_in_order_with_yaml_values() -> None:
    config = load_rollout_config(
        ROOT / "configs" / "rollout" / "babyai_tiny.yaml",
        [
            "buffer.max_staleness=4",
            "scaling_inter.turn_caps=[5, 10]",
            "envs.0.addresses=['tcp://127.0.0.1:9000', 'http://h:1']",
            "weights_endpoint=ipc:///tmp/w.sock",
            "dataset.epochs=null",
            "buffer.max_staleness=5",
        ],
    )
    assert config.buffer.max_staleness == 5
    assert config.scaling_inter.turn_caps == [5, 10]
    assert config.envs[0].addresses == ["tcp://127.0.0.1:9000", "http://h:1"]
    assert config.weights_endpoint == "ipc:///tmp/w.sock"


@pytest.mark.parametrize(
    "override, where",
    [
        ("buffer.bogus=1", "buffer.bogus: Extra inputs are not permitted"),
        ("envs.0.colour=red", "envs.0.colour: Extra inputs are not permitted"),
        ("buffer.max_staleness=-1", "buffer.max_staleness"),
        ("engine.top_p=0", "engine.top_p"),
        (
            "engine={max_model_len: 2048, max_tokens_per_turn: 99999}",
            "max_tokens_per_turn (99999) must be below max_model_len (2048)",
        ),
        ("scaling_inter.turn_caps=[10, 5]", "turn caps must not decrease"),
        ("scaling_inter.turn_caps=[]", "scaling_inter.turn_caps"),
        ("learner.endpoints=['localhost:5555']", "not a ZeroMQ endpoint"),
        ("envs.0.addresses=['127.0.0.1:36001']", "is not http://HOST:PORT"),
        ("envs.0.dialect=soap", "envs.0.dialect"),
        ("envs.0.invalid_penalty=1.5", "envs.0.invalid_penalty"),
        ("dataset.env=textcraft", "has no servers"),
        ("dataset.group_size=0", "dataset.group_size"),
    ],
)
def test_errors_name_the_key_path(override: str, where: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_rollout_config(None, [*MINIMAL, override])
    assert where in str(e.value)


@pytest.mark.parametrize(
    "override, problem",
    [
        (
            "rollout.envs.0.action_format=react",
            "init_model writes miniwob's actions as webarena but rollout.envs reads them as "
            "react: set init_model.action_format: react",
        ),
        ("rollout.envs.0.system_prompt=Click.", "init_model's system prompt for miniwob is not"),
    ],
)
def test_a_created_policy_must_meet_the_runs_format_and_prompt(override: str, problem: str) -> None:
    """A policy warmed up on another reply format never writes an action the run parses."""
    from agentgym_rl.config.loader import load_config
    from agentgym_rl.config.train import TrainConfig

    path = ROOT / "configs/train/miniwob_click.yaml"
    assert load_config(TrainConfig, path, []).init_model is not None  # as shipped: they agree
    with pytest.raises(ConfigError) as e:
        load_config(TrainConfig, path, [override])
    assert problem in str(e.value)
    agreed = [override, f"init_model.{override.split('.', 3)[-1]}"]
    assert load_config(TrainConfig, path, agreed).rollout.envs[0].env == "miniwob"


def test_missing_required_sections() -> None:
    with pytest.raises(ConfigError) as e:
        load_rollout_config(None, ["model=m"])
    for key in ("envs", "dataset", "learner"):
        assert f"  {key}: Field required" in str(e.value)


@pytest.mark.parametrize("text", ["novalue", "=3", "a..b=1", "a.b=[unclosed"])
def test_malformed_overrides(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_override(text)


def test_override_into_list_and_scalars() -> None:
    data: dict = {"a": [{"b": 1}], "s": 3}
    apply_override(data, ["a", "0", "b"], 2)
    assert data["a"][0]["b"] == 2
    with pytest.raises(ConfigError, match="no item"):
        apply_override(data, ["a", "5", "b"], 1)
    with pytest.raises(ConfigError, match="not a mapping"):
        apply_override(data, ["s", "x"], 1)


def test_bad_yaml_files(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "broken.yaml").write_text("a: [1,\n")
    for name in ("list.yaml", "broken.yaml", "missing.yaml"):
        with pytest.raises(ConfigError):
            load_rollout_config(tmp_path / name)


def _models(model: type[BaseModel]) -> list[type[BaseModel]]:
    found = [model]
    for field in model.model_fields.values():
        ann = field.annotation
        for arg in (ann, *getattr(ann, "__args__", ())):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                found += _models(arg)
    return found


def test_every_field_is_documented_and_frozen() -> None:
    for model in _models(RolloutConfig):
        assert model.model_config.get("extra") == "forbid"
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring"
    config = load_rollout_config(None, MINIMAL)
    with pytest.raises(ValueError):
        config.buffer.max_staleness = 3  # type: ignore[misc]


def test_engine_dtype_is_validated() -> None:
    from agentgym_rl.config import ConfigError, load_rollout_config

    shipped = ROOT / "configs" / "rollout" / "babyai_tiny.yaml"
    assert load_rollout_config(shipped, []).engine.dtype == "float32"
    assert load_rollout_config(shipped, ["engine.dtype=bfloat16"]).engine.dtype == "bfloat16"
    with pytest.raises(ConfigError, match=r"engine\.dtype"):
        load_rollout_config(shipped, ["engine.dtype=float8"])


def test_engine_context_defaults_to_the_models_own(tmp_path: Path) -> None:
    """`engine.max_model_len` unset is None (the model's own length, resolved when the engine
    starts); then the turn length is checked against the model's `max_position_embeddings`."""
    from agentgym_rl.config import load_rollout_config
    from agentgym_rl.config.startup import turn_misfit

    engine = load_rollout_config(None, MINIMAL).engine
    assert engine.max_model_len is None and engine.max_tokens_per_turn == 512
    (tmp_path / "config.json").write_text('{"max_position_embeddings": 512}')
    flags = ("engine.max_tokens_per_turn", "engine.max_model_len")
    assert turn_misfit(tmp_path, None, 512, *flags) == (
        "engine.max_tokens_per_turn (512) must be below the context length "
        "(512, engine.max_model_len)"
    )
    assert turn_misfit(tmp_path, None, 511, *flags) is None
    assert turn_misfit(tmp_path, 1024, 512, *flags) is None  # an explicit length wins
    assert turn_misfit(tmp_path / "missing", None, 99999, *flags) is None  # length unknown
