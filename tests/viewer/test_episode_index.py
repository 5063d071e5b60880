"""The run viewer's episode index: filters agree with reading every record, pages index only what
they need, a log being written (a torn last line, new lines, a new server's log) is followed,
and old or foreign lines neither break it nor vanish silently."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from agentgym_rl.episode.log import EpisodeLog, EpisodeRecord, read_episodes
from agentgym_rl.viewer.episode_index import EpisodeFilter, EpisodeIndex
from agentgym_rl.viewer.page_data import RunView


def record(k: int) -> EpisodeRecord:
    """Episode k: scalars that vary with k so that every filter selects a known subset."""
    n = 12 + k % 5
    mask = [0] * 6 + [1] * (n - 6)
    return EpisodeRecord(
        item_id=f"babyai_{k % 7}",
        env="babyai" if k % 3 else "maze",
        category=None,
        group_id=k // 2,
        request_id=f"g{k // 2}-e{k % 2}",
        reward=float(k % 2),
        success=bool(k % 2),
        status="done" if k % 2 else "turn_cap",
        turns=1 + k % 4,
        turn_cap=4,
        stage=0,
        dispatch_version=k // 10,
        drift=k % 11 == 0,
        tokenizer=None,
        input_ids=list(range(n)),
        loss_mask=mask,
        logprobs=[-0.5 if m else 0.0 for m in mask],
        versions=[k // 10] * n,
        turn_spans=[(6, n)],
        split="held_out" if k % 5 == 0 else "train",
        invalid_turns=k % 3,
        forks=0,
    )


def write_log(path: Path, ks: range) -> list[EpisodeRecord]:
    log = EpisodeLog(path)
    recs = [record(k) for k in ks]
    for r in recs:
        log.write(r)
    log.close()
    return recs


FILTERS = [
    (EpisodeFilter(), lambda r: True),
    (EpisodeFilter(env="maze"), lambda r: r.env == "maze"),
    (
        EpisodeFilter(split="held_out", outcome="failure"),
        lambda r: r.split == "held_out" and not r.success,
    ),
    (EpisodeFilter(version_min=3, version_max=5), lambda r: 3 <= r.dispatch_version <= 5),
    (EpisodeFilter(turns_min=2, turns_max=3), lambda r: 2 <= r.turns <= 3),
    (EpisodeFilter(invalid_min=2), lambda r: (r.invalid_turns or 0) >= 2),
    (EpisodeFilter(drift=True), lambda r: r.drift),
    (EpisodeFilter(task="babyai_3"), lambda r: r.item_id == "babyai_3"),
    (EpisodeFilter(env="none-such"), lambda r: False),
]


@pytest.mark.parametrize(("flt", "keep"), FILTERS)
def test_filters_and_pages_agree_with_reading_every_record(
    tmp_path: Path, flt: EpisodeFilter, keep: Callable[[EpisodeRecord], bool]
) -> None:
    path = tmp_path / "episodes.jsonl"
    recs = write_log(path, range(200))
    expected = [i for i, r in enumerate(recs) if keep(r)]
    index = EpisodeIndex([path])
    got: list[int] = []
    for page in range(100):
        rows = index.page(flt, page, 7).rows
        got += [int(r["ref"].split(".")[1]) for r in rows]
        if len(rows) < 7:
            break
    assert got == expected
    final = index.page(flt, 0, 7)
    assert final.complete and final.matched == len(expected)
    if expected:  # a row carries the scalars the table shows, as the record has them
        row, rec = index.page(flt, 0, 1).rows[0], recs[expected[0]]
        assert (row["item_id"], row["split"], row["version"], row["success"]) == (
            rec.item_id,
            rec.split,
            rec.dispatch_version,
            rec.success,
        )
        assert index.record(row["ref"]) == rec


def test_a_page_indexes_only_the_lines_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentgym_rl.viewer.episode_index as episode_index

    monkeypatch.setattr(episode_index, "CHUNK_BYTES", 4096)  # about 10 lines a read
    path = tmp_path / "episodes.jsonl"
    write_log(path, range(3000))
    index = EpisodeIndex([path])
    first = index.page(EpisodeFilter(), 0, 20)
    assert len(first.rows) == 20 and not first.complete and first.indexed < 100
    rare = index.page(EpisodeFilter(task="babyai_4", split="held_out"), 0, 5)  # 1 in 35
    assert len(rare.rows) == 5 and 100 < rare.indexed < 600
    assert index.grow() and index.indexed == 3000


def test_a_log_being_written_is_followed(tmp_path: Path) -> None:
    path = tmp_path / "rollout-0" / "episodes.jsonl"
    path.parent.mkdir()
    index = EpisodeIndex([path, tmp_path / "rollout-1" / "episodes.jsonl"])
    assert index.grow() and index.indexed == 0  # no file yet: an empty log
    recs = write_log(path, range(5))
    torn = record(5).to_json()
    with path.open("a") as f:
        f.write(torn[:100])  # the writer is mid-line
    assert index.grow() and index.indexed == 5
    with path.open("a") as f:
        f.write(torn[100:] + "\n")
    (tmp_path / "rollout-1").mkdir()
    write_log(tmp_path / "rollout-1" / "episodes.jsonl", range(100, 103))
    assert index.grow() and index.indexed == 9
    refs = [r["ref"] for r in index.page(EpisodeFilter(), 0, 50).rows]
    assert refs == [f"0.{i}" for i in range(6)] + ["1.0", "1.1", "1.2"]
    assert index.record("0.5") == record(5) and index.record("1.2") == record(102)
    assert recs[0] == index.record("0.0")
    with pytest.raises(KeyError):
        index.record("0.99")


def test_old_and_foreign_lines(tmp_path: Path) -> None:
    """A format-2 line reads as a training episode with unknown counts; a line that is not an
    episode is skipped and counted (the overview says so)."""
    path = tmp_path / "rollout-0" / "episodes.jsonl"
    path.parent.mkdir()
    write_log(path, range(2))
    d = json.loads(path.read_text().splitlines()[0])
    for key in ("split", "invalid_turns", "forks"):
        del d[key]
    d["v"] = 2
    with path.open("a") as f:
        f.write(json.dumps(d) + "\n" + '{"not": "an episode"}\n' + "[1, 2]\n")
    view = RunView(tmp_path)
    got = view.episodes({"split": "train"})
    assert [r["ref"] for r in got["rows"]] == ["0.1", "0.2"] and got["complete"]
    assert got["rows"][1]["invalid"] is None
    assert view.index.skipped == 2
    assert any(
        "2 lines of the episode logs are not episodes" in m for m in view.overview()["missing"]
    )
    with pytest.raises(ValueError, match="turns_min must be a whole number"):
        view.episodes({"turns_min": "two"})


def test_overview_and_task_views_from_records(tmp_path: Path) -> None:
    """Training success per env by version comes from the indexed episodes; a task lists its
    held-out episodes under every evaluated version, one without episodes listed empty."""
    path = tmp_path / "rollout-0" / "episodes.jsonl"
    path.parent.mkdir()
    recs = write_log(path, range(60))
    evals = [{"version": v, "success": 0.5, "episodes": 4} for v in (0, 2, 4, 6)]
    (tmp_path / "rollout-0" / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    outcome = {"version": 6, "item_id": "babyai_0", "success": True, "reward": 1.0, "turns": 2}
    (tmp_path / "rollout-0" / "eval_episodes.jsonl").write_text(json.dumps(outcome) + "\n")
    view = RunView(tmp_path)
    o = view.overview()
    train = {t["env"]: dict(t["points"]) for t in o["training"]}
    for env in ("babyai", "maze"):
        for v in range(6):
            mine = [
                r.success
                for r in recs
                if r.env == env and r.split == "train" and r.dispatch_version == v
            ]
            if mine:
                assert train[env][v] == pytest.approx(np.mean(mine))
    assert [list(p) for p in o["held_out"][0]["points"]] == [[0, 0.5], [2, 0.5], [4, 0.5], [6, 0.5]]
    assert any("learner records" in m for m in o["missing"])
    task = view.task("babyai_0")
    held = [r for r in recs if r.item_id == "babyai_0" and r.split == "held_out"]
    by_version = {v["version"]: [e["ref"] for e in v["episodes"]] for v in task["versions"]}
    assert set(by_version) == {0, 2, 4, 6} | {r.dispatch_version for r in held}
    assert sum(len(x) for x in by_version.values()) == len(held) > 0
    assert by_version[6] == []  # evaluated, nothing logged whole at that version: its outcome
    assert [v["outcomes"] for v in task["versions"] if v["version"] == 6] == [[outcome]]
    assert all(not v["outcomes"] for v in task["versions"] if v["episodes"])
    assert list(read_episodes(path)) == recs


def test_a_judged_episodes_page_has_the_judge_beside_the_env(tmp_path: Path) -> None:
    path = tmp_path / "rollout-0" / "episodes.jsonl"
    path.parent.mkdir()
    verdict = {"score": 0.8, "mode": "episode", "prompt": "The task, ...", "reply": "SCORE: 0.8"}
    judged = replace(record(0), judge={**verdict, "success": True, "env_reward": 0.0})
    log = EpisodeLog(path)
    log.write(judged)
    log.write(record(1))
    log.close()
    view = RunView(tmp_path)
    first, second = sorted(r["ref"] for r in view.episodes({})["rows"])
    page = view.episode(first)
    assert page["judge_prompt"] == "The task, ..."
    assert any("judge (episode): score 0.8, success" in line for line in page["header"])
    assert "env says failure" in "\n".join(page["header"])
    other = view.episode(second)
    assert other["judge_prompt"] is None and not any("judge" in x for x in other["header"])
