"""The yardsticks beside a policy: chance and the env's rule measured on the same tasks and turn
cap, once (a second call reads the cache), only for envs that declare a rule; an eval report
shows them beside each row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgym_rl.episode import yardsticks as module
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.scoring import EvalRecord, summarize
from agentgym_rl.episode.yardsticks import yardsticks

pytestmark = pytest.mark.unit

# GoToLocal tasks of goto_test.json: the goal among several visible objects
TASKS = [Task(f"babyai_{i}", "babyai", i, "GoToLocal") for i in (40009, 40049, 40089, 40129)]
COMPACT = {"babyai": {"observation": "compact"}}


def test_chance_and_rule_are_measured_once_and_cached(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    cache = tmp_path / "yardsticks.json"
    first = yardsticks(TASKS, {"babyai": 5}, COMPACT, cache=cache)["babyai"]
    assert first["env"] == "babyai" and first["turn_cap"] == 5
    assert first["rule_name"] and first["rule"]["GoToLocal"] >= 0.75
    assert first["chance"]["GoToLocal"] < first["rule"]["GoToLocal"]
    assert set(first["chance"]) == {"GoToLocal", "all"}
    [key] = json.loads(cache.read_text())
    assert "cap=5" in key and "observation=compact" in key

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured again instead of read from the cache")

    monkeypatch.setattr(module, "yardstick_rates", refuse)
    assert yardsticks(TASKS, {"babyai": 5}, COMPACT, cache=cache)["babyai"] == first
    with pytest.raises(AssertionError, match="measured again"):  # another cap is another key
        yardsticks(TASKS, {"babyai": 2}, COMPACT, cache=cache)


def test_an_env_without_a_rule_gets_none(tmp_path: Path) -> None:
    tasks = [Task("noop_1", "noop", 1, "x")]
    assert yardsticks(tasks, {"noop": 2}, cache=tmp_path / "y.json") == {}
    assert not (tmp_path / "y.json").exists()


def test_the_eval_table_shows_them_beside_each_row() -> None:
    records = [
        EvalRecord("babyai", "GoToLocal", t.item_id, i % 2 == 0, 1.0) for i, t in enumerate(TASKS)
    ]
    report = summarize(records)
    plain = report.to_markdown()
    assert "chance" not in plain
    report.yardsticks = {
        "babyai": {
            "chance": {"GoToLocal": 0.405, "all": 0.405},
            "rule": {"GoToLocal": 0.975, "all": 0.975},
            "rule_name": "the goal's action if listed, else turn left",
            "turn_cap": 5,
        }
    }
    table = report.to_markdown()
    assert "| env | category | tasks | Avg@1 | chance | rule | Pass@1 | mean reward |" in table
    assert "| babyai | GoToLocal | 4 | 50.0 | 40.5 | 97.5 | 50.0 | 1.000 |" in table
    assert "rule: the goal's action if listed, else turn left (same tasks, turn cap 5)" in table
    assert report.to_dict()["yardsticks"]["babyai"]["rule"]["all"] == 0.975
