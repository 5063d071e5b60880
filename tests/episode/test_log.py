"""Episode logs: sampling, round trip, clear errors (the dispatcher hook: tests/rollout)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentgym_rl import _core
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.log import (
    EpisodeLog,
    EpisodeLogError,
    find_episode_log,
    read_episodes,
)
from agentgym_rl.episode.types import EpisodePlan, TurnBudget


def sample(reward: float, n: int = 6) -> _core.Sample:
    mask = np.array([0, 0, 1, 1, 0, 1][:n], np.uint8)
    logprobs = np.where(mask == 1, -0.123456, 0.0).astype(np.float32)
    logprobs[-1] = np.nan  # an engine without logprobs
    return _core.Sample(
        np.arange(10, 10 + n, dtype=np.uint32),
        mask,
        logprobs,
        np.array([3, 3, 3, 4, 4, 4][:n], np.uint32),
        np.array([2, 4, 5, 6], np.uint32),
        reward=reward,
        status="turn_cap",
        turns=2,
        turn_cap=2,
        stage=1,
        dispatch_version=3,
    )


PLAN = EpisodePlan(Task("babyai_7", "babyai", 7, "GoTo"), 3, TurnBudget(1, 2), "g5-e1")


def test_every_nth_episode_round_trips(tmp_path: Path) -> None:
    log = EpisodeLog.in_dir(tmp_path / "run", every=3, tokenizer="/models/tiny")
    assert log is not None and EpisodeLog.in_dir(tmp_path, every=0) is None
    kept = [log.record(sample(float(i % 2)), PLAN, group_id=5) for i in range(7)]
    log.close()
    assert kept == [True, False, False, True, False, False, True]
    recs = list(read_episodes(tmp_path / "run" / "episodes.jsonl"))
    assert len(recs) == log.written == 3
    r = recs[0]
    assert (r.item_id, r.env, r.category, r.group_id, r.request_id) == (
        "babyai_7",
        "babyai",
        "GoTo",
        5,
        "g5-e1",
    )
    assert (r.status, r.turns, r.turn_cap, r.stage, r.dispatch_version) == ("turn_cap", 2, 2, 1, 3)
    assert r.input_ids == list(range(10, 16)) and r.loss_mask == [0, 0, 1, 1, 0, 1]
    assert r.logprobs[:4] == [0.0, 0.0, -0.1235, -0.1235] and r.logprobs[-1] is None
    assert r.versions == [3, 3, 3, 4, 4, 4] and r.turn_spans == [(2, 4), (5, 6)]
    assert r.tokenizer == "/models/tiny" and r.trained_tokens == 3
    assert [x.success for x in recs] == [False, True, False]  # episodes 0, 3, 6


def test_malformed_lines_name_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    log = EpisodeLog(path)
    log.record(sample(1.0), PLAN, 0)
    good = path.read_text()
    d = json.loads(good)
    del d["loss_mask"]
    path.write_text(good + json.dumps(d) + "\n")
    with pytest.raises(EpisodeLogError, match=r"episodes.jsonl:2: missing key 'loss_mask'"):
        list(read_episodes(path))
    d = json.loads(good)
    d["versions"] = [1]
    path.write_text(json.dumps(d) + "\n" + good)
    with pytest.raises(EpisodeLogError, match=r":1: versions has 1 entries but input_ids has 6"):
        list(read_episodes(path))
    path.write_text(good + good[:40])  # the writer is mid-line: the partial line is skipped
    assert len(list(read_episodes(path))) == 1


def test_find_episode_log_in_run_folder(tmp_path: Path) -> None:
    with pytest.raises(EpisodeLogError, match=r"no episodes\.jsonl under this folder"):
        find_episode_log(tmp_path)
    with pytest.raises(EpisodeLogError, match="no such file or run folder"):
        find_episode_log(tmp_path / "missing")
    first = tmp_path / "rollout0" / "episodes.jsonl"
    first.parent.mkdir()
    first.write_text("")
    assert find_episode_log(tmp_path) == first == find_episode_log(first)
    second = tmp_path / "rollout1" / "episodes.jsonl"
    second.parent.mkdir()
    second.write_text("")
    with pytest.raises(EpisodeLogError, match=r"2 episode logs .*pass one of them"):
        find_episode_log(tmp_path)


def test_env_failure_reason_is_logged_and_shown(tmp_path: Path) -> None:
    from agentgym_rl.viewer.transcript import header

    log = EpisodeLog.in_dir(tmp_path, every=1)
    assert log is not None
    log.record(sample(0.0), PLAN, group_id=1, failure="reset: simulator JVMs all busy")
    log.record(sample(1.0), PLAN, group_id=1)
    log.close()
    failed, fine = read_episodes(tmp_path / "episodes.jsonl")
    assert failed.failure == "reset: simulator JVMs all busy" and fine.failure is None
    assert "env failure: reset: simulator JVMs all busy" in header(failed, "1 of 2")
    assert not any(line.startswith("env failure") for line in header(fine, "2 of 2"))
