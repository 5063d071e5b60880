"""Episode logs: sampling, round trip, clear errors (the dispatcher hook: tests/rollout)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentgym_rl import _core
from agentgym_rl.episode.agent import Played
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.log import (
    LAST_OBSERVATION_CHARS,
    EpisodeLog,
    EpisodeLogError,
    find_episode_log,
    read_episodes,
    record_of,
    summary_of,
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
    kept = [log.record(Played((sample(float(i % 2)),)), PLAN, group_id=5) for i in range(7)]
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
    log.record(Played((sample(1.0),)), PLAN, 0)
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
    log.record(Played((sample(0.0),), "reset: simulator JVMs all busy"), PLAN, group_id=1)
    log.record(Played((sample(1.0),)), PLAN, group_id=1)
    log.close()
    failed, fine = read_episodes(tmp_path / "episodes.jsonl")
    assert failed.failure == "reset: simulator JVMs all busy" and fine.failure is None
    assert "env failure: reset: simulator JVMs all busy" in header(failed, "1 of 2")
    assert not any(line.startswith("env failure") for line in header(fine, "2 of 2"))


def test_format_3_logs_split_counts_and_turn_rewards_scalars_first(tmp_path: Path) -> None:
    """A held-out episode is logged whatever `every` says, with its split; invalid turns,
    forks and per-turn rewards round-trip; a line's scalars parse without its tokens."""
    log = EpisodeLog(tmp_path / "episodes.jsonl", every=5)
    s = sample(1.0)
    with_rewards = _core.Sample(
        s.input_ids,
        s.loss_mask,
        s.logprobs,
        s.versions,
        s.turn_spans,
        reward=1.0,
        status="done",
        turns=2,
        turn_cap=2,
        turn_rewards=np.array([0.25, 0.75], np.float32),
    )
    assert log.record(Played((with_rewards,), invalid=1, forks=2), PLAN, 4)
    assert not log.record(Played((s,), invalid=0), PLAN, 4)  # not the 5th: not kept
    log.record_held_out(Played((s,), invalid=0), PLAN)
    log.close()
    train, held_out = read_episodes(tmp_path / "episodes.jsonl")
    assert (train.split, train.invalid_turns, train.forks) == ("train", 1, 2)
    assert train.turn_rewards == [0.25, 0.75]
    assert (held_out.split, held_out.group_id, held_out.turn_rewards) == ("held_out", -1, None)
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    head = summary_of(lines[0])
    assert head["v"] == 5 and head["split"] == "train" and head["invalid_turns"] == 1
    assert not set(head) & {"input_ids", "loss_mask", "turn_rewards"}  # tokens never parsed
    assert summary_of(lines[1])["split"] == "held_out"


def test_version_2_lines_still_read(tmp_path: Path) -> None:
    """A line of format version 2 (split and counts absent, tokenizer before the arrays)."""
    log = EpisodeLog(tmp_path / "episodes.jsonl")
    log.record(Played((sample(1.0),)), PLAN, 0)
    log.close()
    d = json.loads((tmp_path / "episodes.jsonl").read_text())
    for key in ("split", "invalid_turns", "forks"):
        del d[key]
    old = {"v": 2, **{k: v for k, v in d.items() if k != "v"}}
    (tmp_path / "episodes.jsonl").write_text(json.dumps(old) + "\n")
    (r,) = read_episodes(tmp_path / "episodes.jsonl")
    assert (r.split, r.invalid_turns, r.forks) == ("train", None, None)
    assert summary_of(json.dumps(old))["item_id"] == "babyai_7"
    d["split"] = "test"
    (tmp_path / "episodes.jsonl").write_text(json.dumps(d) + "\n")
    with pytest.raises(EpisodeLogError, match="split 'test' is not one of"):
        list(read_episodes(tmp_path / "episodes.jsonl"))


def test_the_envs_last_answer_is_kept_head_and_tail(tmp_path: Path) -> None:
    """No turn's context holds the env's answer to the last turn: the line keeps it (clipped in
    the middle), and a line without one has no key."""
    long = "Crafted 1 oak fence gate\n" + "x" * 5000 + "\nInventory: 1 oak fence gate"
    log = EpisodeLog(tmp_path / "episodes.jsonl")
    for last in (long, None):
        log.write(record_of(sample(1.0), PLAN, 2, None, last_observation=last))
    log.close()
    kept, missing = read_episodes(tmp_path / "episodes.jsonl")
    assert kept.last_observation is not None and missing.last_observation is None
    assert len(kept.last_observation) <= LAST_OBSERVATION_CHARS + len(" [...] ")
    assert kept.last_observation.startswith("Crafted 1 oak fence gate\nxx")
    assert kept.last_observation.endswith("\nInventory: 1 oak fence gate")
    assert "last_observation" not in summary_of(
        (tmp_path / "episodes.jsonl").read_text().splitlines()[1]
    )
