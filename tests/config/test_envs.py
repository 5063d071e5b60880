"""env_discovery.py: the installed env package, and the split paths configs name resolved from any
working directory (the shipped configs' paths included)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import agentgym_envs
from agentgym_rl import env_discovery as envs
from agentgym_rl.supervise.preflight import env_problems

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(agentgym_envs.__file__).resolve().parent


def _splits(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "split"] + [
            s for v in node.values() for s in _splits(v)
        ]
    if isinstance(node, list):
        return [s for v in node for s in _splits(v)]
    return []


# the splits the env package ships, as the configs in configs/ name them (other splits, e.g.
# data/sciworld/train.json of the GPU recipes, are files the user prepares)
SHIPPED_SPLITS = sorted(
    {
        s
        for p in (ROOT / "configs").rglob("*.yaml")
        for s in _splits(yaml.safe_load(p.read_text()))
        if "agentgym_envs/" in s
    }
)


def test_the_shipped_configs_name_splits() -> None:
    assert "envs/agentgym_envs/babyai/data/goto_train.json" in SHIPPED_SPLITS


@pytest.mark.parametrize("split", SHIPPED_SPLITS)
def test_shipped_splits_resolve_from_any_directory(
    split: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    found = envs.shipped_path(split)
    assert found.is_file() and found.resolve().is_relative_to(PACKAGE)
    assert envs.portable_path(found) == split  # what a record keeps resolves the same way


def test_existing_and_unknown_paths_are_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    own = Path("envs/agentgym_envs/babyai/data/train.json")  # a file here wins over the package
    own.parent.mkdir(parents=True)
    own.write_text("[]")
    assert envs.shipped_path(own) == own
    short = envs.shipped_path("agentgym_envs/babyai/data/train.json")  # without envs/ too
    assert short.resolve() == PACKAGE / "babyai" / "data" / "train.json"
    assert envs.portable_path(tmp_path / "x" / "y.json") == "x/y.json"  # below cwd: relative
    missing = Path("agentgym_envs/babyai/data/nope.json")
    assert envs.shipped_path(missing) == missing  # the reader reports it missing
    assert envs.shipped_path("data/train.json") == Path("data/train.json")


def test_registry_and_a_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    assert envs.envs_installed() and {"babyai", "noop", "textcraft"} <= set(envs.env_entries())
    monkeypatch.setattr(envs, "ENVS_PACKAGE", "agentgym_envs_not_installed")
    assert not envs.envs_installed()
    with pytest.raises(envs.EnvsNotInstalled, match="pip install -e envs"):
        envs.env_entries()
    assert env_problems(["babyai"]) == [
        "env_servers: the env servers' package agentgym_envs_not_installed is not installed: "
        "`pip install agentgym-envs`, or `pip install -e envs` in a checkout"
    ]


def test_the_rollout_side_reads_each_envs_own_declarations() -> None:
    """No table of env facts outside the env classes: the client's dialect, action format,
    prompt and score rule are what the class declares; an env not importable here gets the
    defaults (a config states them for an env served from elsewhere)."""
    from agentgym_rl.config.rollout import http_dialect
    from agentgym_rl.episode.actions import env_format
    from agentgym_rl.episode.outcome import is_success, reward_of
    from agentgym_rl.episode.prompts import system_prompt

    assert [http_dialect(e) for e in ("babyai", "sciworld", "searchqa", "miniwob")] == [
        "agentgym",
        "agentgym",  # SciWorld's extra reset fields are the common dialect to a client
        "searchqa",
        "webarena",
    ]
    assert env_format("searchqa").value == "tags" and env_format("textcraft").value == "react"
    babyai = agentgym_envs.env_class("babyai")
    assert system_prompt("babyai", env_format("babyai")) == babyai.system_prompt
    assert system_prompt("not-an-env", env_format("not-an-env")).startswith("You are an agent")
    assert reward_of("sciworld", 50.0) == 0.5 and not is_success("sciworld", 0.5)
    assert is_success("sciworld", 1.0) and is_success("babyai", 0.1)
