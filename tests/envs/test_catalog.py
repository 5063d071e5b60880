"""The env catalog: entry points and references found one way, bad plugins refused with the
reason while the others still load, declared options typed, splits from files or ranges."""

from __future__ import annotations

import sys
import types
from importlib.metadata import EntryPoint
from typing import Any, ClassVar

import pytest

from agentgym_envs import catalog
from agentgym_envs.catalog import EnvLoadError, entries, env_class, load_env
from agentgym_envs.server.base import Environment, EnvOption, Episode, StepResult

pytestmark = pytest.mark.unit


class _Episode(Episode):
    def reset(self, data_idx: int) -> StepResult:
        return StepResult(f"task {data_idx}")

    def step(self, action: str) -> StepResult:
        return StepResult("ok", done=True)

    def observation(self) -> str:
        return "ok"

    def available_actions(self) -> list[str]:
        return ["a"]


class Counting(Environment):
    name = "counting"
    options: ClassVar[tuple[EnvOption, ...]] = (
        EnvOption("size", int, 3, "how many", minimum=1),
        EnvOption("mode", str, "fast", "which way", choices=("fast", "slow")),
        EnvOption("loud", bool, False, "say it"),
    )
    splits: ClassVar[dict[str, str | range]] = {"train": range(4), "test": range(10, 12)}

    def __init__(self, size: int = 3, mode: str = "fast", loud: bool = False) -> None:
        self.size, self.mode, self.loud = size, mode, loud

    def new_episode(self) -> _Episode:
        return _Episode()

    def num_tasks(self) -> int | None:
        return None

    @classmethod
    def category(cls, data_idx: int) -> str:
        return "even" if data_idx % 2 == 0 else "odd"


class HalfEpisode(Episode):  # misses observation and available_actions
    def reset(self, data_idx: int) -> StepResult:
        return StepResult("")

    def step(self, action: str) -> StepResult:
        return StepResult("")


class Half(Environment):
    name = "half"

    def new_episode(self) -> HalfEpisode:
        return HalfEpisode()  # type: ignore[abstract]


class NoTasks(Environment):  # misses num_tasks
    name = "notasks"

    def new_episode(self) -> _Episode:
        return _Episode()


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entry points of three made-up packages over a module holding the classes above."""
    module = types.ModuleType("fake_plugins")
    for cls in (Counting, Half, NoTasks):
        setattr(module, cls.__name__, cls)
    monkeypatch.setitem(sys.modules, "fake_plugins", module)

    def point(name: str, value: str, dist: str) -> EntryPoint:
        ep = EntryPoint(name, value, catalog.GROUP)
        return ep._for(types.SimpleNamespace(name=dist, version="1.0"))  # type: ignore[attr-defined]

    points = [
        point("counting", "fake_plugins:Counting", "pkg-a"),
        point("half", "fake_plugins:Half", "pkg-a"),
        point("notasks", "fake_plugins:NoTasks", "pkg-a"),
        point("missing", "not_a_module_anywhere:Env", "pkg-b"),
        point("clash", "fake_plugins:Counting", "pkg-a"),
        point("clash", "fake_plugins:Counting", "pkg-b"),
        point("renamed", "fake_plugins:Counting", "pkg-b"),
    ]
    monkeypatch.setattr(catalog, "entry_points", lambda group: points)
    monkeypatch.delenv(catalog.REFERENCES_VAR, raising=False)
    catalog._checked.cache_clear()


@pytest.mark.usefixtures("plugins")
def test_bad_plugins_are_refused_naming_why_and_the_others_load() -> None:
    assert set(entries()) == {"counting", "half", "notasks", "missing", "clash", "renamed"}
    assert entries()["counting"].package == "pkg-a 1.0"
    assert env_class("counting") is Counting
    refused = {
        "half": "its episode HalfEpisode does not implement available_actions, observation",
        "notasks": "it does not implement num_tasks",
        "missing": "it needs the module 'not_a_module_anywhere', not installed here",
        "clash": "registered by more than one package (pkg-a 1.0, pkg-b 1.0)",
        "renamed": "registered as 'renamed' but its `name` is 'counting'",
        "nope": "unknown env 'nope'; known: clash, counting, half, missing, notasks, renamed",
    }
    for name, reason in refused.items():
        with pytest.raises(EnvLoadError) as caught:
            env_class(name)
        assert reason in str(caught.value), name
    assert env_class("counting") is Counting  # nothing above harmed it


@pytest.mark.usefixtures("plugins")
def test_declared_options_are_typed_and_checked() -> None:
    env = load_env("counting", size="5", mode="slow", loud="yes")
    assert (env.size, env.mode, env.loud) == (5, "slow", True)  # type: ignore[attr-defined]
    bad = {
        "size": ("0", "counting option size='0': must be >= 1"),
        "mode": ("quick", "expected one of fast, slow"),
        "loud": ("maybe", "expected true or false"),
        "colour": ("red", "does not take options ['colour'] (its options: size, mode, loud)"),
    }
    for key, (value, message) in bad.items():
        with pytest.raises(ValueError) as caught:
            load_env("counting", **{key: value})
        assert message in str(caught.value)


def test_range_splits_carry_the_envs_categories() -> None:
    assert Counting.split_names() == ["train", "test"]
    assert Counting.tasks("test") == [
        {"item_id": "counting_10", "category": "even"},
        {"item_id": "counting_11", "category": "odd"},
    ]
    with pytest.raises(KeyError, match="has no split 'dev' \\(its splits: train, test\\)"):
        Counting.tasks("dev")


@pytest.mark.usefixtures("plugins")
def test_an_env_loaded_by_reference_is_known_by_name_here_and_in_children(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    module = types.ModuleType("my_envs")
    my = type("Mine", (Counting,), {"name": "mine"})
    module.Mine = my  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "my_envs", module)
    assert env_class("my_envs:Mine") is my
    assert env_class("mine") is my
    assert entries()["mine"].package == "(by reference)"
    assert "mine=my_envs:Mine" in os.environ[catalog.REFERENCES_VAR]  # children inherit it


def test_the_built_in_envs_are_entry_points_of_this_package() -> None:
    found: dict[str, Any] = entries()
    built_in = {"babyai", "textcraft", "sciworld", "searchqa", "webarena", "miniwob"}
    assert built_in | {"wordle", "maze", "noop"} <= set(found)
    assert {found[n].package.split()[0] for n in built_in} == {"agentgym-envs"}
    for name in built_in:
        cls = env_class(name)
        assert cls.name == name and cls.description and "train" in cls.split_names()
