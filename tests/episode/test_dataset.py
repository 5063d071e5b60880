"""Split files, per-epoch shuffles and cursor resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgym_rl.episode.dataset import (
    Cursor,
    DatasetError,
    Task,
    TaskSource,
    load_split,
    parse_item_id,
)

ROOT = Path(__file__).resolve().parents[2]
BABYAI_TRAIN = ROOT / "envs" / "agentgym_envs" / "babyai" / "data" / "train.json"


def tasks(n: int) -> list[Task]:
    return [Task(f"noop_{i}", "noop", i) for i in range(n)]


def test_loads_the_babyai_split() -> None:
    split = load_split(BABYAI_TRAIN, "babyai")
    assert len(split) == 810
    assert all(t.env == "babyai" and t.item_id == f"babyai_{t.data_idx}" for t in split)
    assert split[0].category is not None


@pytest.mark.parametrize(
    "item, parsed", [("babyai_17", ("babyai", 17)), ("sci_world_3", ("sci_world", 3))]
)
def test_parse_item_id(item: str, parsed: tuple[str, int]) -> None:
    assert parse_item_id(item) == parsed


@pytest.mark.parametrize("item", ["babyai", "babyai_x", "_3", "babyai_-1"])
def test_bad_item_ids(item: str) -> None:
    with pytest.raises(DatasetError):
        parse_item_id(item)


def test_split_errors(tmp_path: Path) -> None:
    path = tmp_path / "split.json"
    for content, env in [("[]", None), ('{"a": 1}', None), ('[{"id": 1}]', None)]:
        path.write_text(content)
        with pytest.raises(DatasetError):
            load_split(path, env)
    path.write_text(json.dumps([{"item_id": "textcraft_1"}]))
    with pytest.raises(DatasetError, match="not an 'babyai' task"):
        load_split(path, "babyai")
    with pytest.raises(DatasetError):
        load_split(tmp_path / "missing.json")
    path.write_text(json.dumps([{"item_id": "babyai_1", "reference": ["a", "b"]}]))
    with pytest.raises(DatasetError, match="reference must be a string"):
        load_split(path)


def test_a_rows_reference_answer_is_kept_for_a_judge(tmp_path: Path) -> None:
    path = tmp_path / "split.json"
    path.write_text(
        json.dumps([{"item_id": "searchqa_3", "reference": "Paris"}, {"item_id": "searchqa_4"}])
    )
    assert [t.reference for t in load_split(path)] == ["Paris", None]


def test_epochs_are_shuffled_permutations() -> None:
    source = TaskSource(tasks(20), seed=3)
    e0 = [source.next() for _ in range(20)]
    e1 = [source.next() for _ in range(20)]
    assert source.cursor == Cursor(1, 20)
    assert sorted(t.data_idx for t in e0) == sorted(t.data_idx for t in e1) == list(range(20))  # type: ignore[union-attr]
    assert e0 != e1 and [t.data_idx for t in e0] != list(range(20))  # type: ignore[union-attr]
    assert TaskSource(tasks(20), seed=3).order(1) == source.order(1)
    assert TaskSource(tasks(20), seed=4).order(0) != source.order(0)


def test_resume_from_cursor_continues_exactly() -> None:
    full = TaskSource(tasks(7), seed=1)
    expected = [full.next() for _ in range(25)]
    first = TaskSource(tasks(7), seed=1)
    head = [first.next() for _ in range(11)]
    resumed = TaskSource(tasks(7), seed=1, cursor=first.cursor)
    tail = [resumed.next() for _ in range(14)]
    assert head + tail == expected
    assert first.cursor == Cursor(1, 4)


def test_epoch_limit_and_no_shuffle() -> None:
    source = TaskSource(tasks(3), shuffle=False, epochs=2)
    assert [t.data_idx for t in source] == [0, 1, 2, 0, 1, 2]
    assert source.exhausted and source.next() is None


def test_rejects_bad_cursor() -> None:
    with pytest.raises(DatasetError):
        TaskSource(tasks(3), cursor=Cursor(0, 4))
