"""The token log's records: what is written reads back (float16 in base64), a torn last line is
skipped and a malformed one named, rows are picked spread over a batch, and the viewer's join
maps each part's record onto that part's trained positions, refusing one of another length."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from test_episode_index import record

from agentgym_rl.episode.context import part_id
from agentgym_rl.learner.token_log import (
    TokenLog,
    TokenLogError,
    TokenRecord,
    pick_rows,
    read_tokens,
)
from agentgym_rl.viewer.token_view import trained_tokens


def token_record(request_id: str, n: int, step: int = 1, seed: int = 0) -> TokenRecord:
    rng = np.random.default_rng(seed)
    lp = -rng.exponential(2.0, n).astype(np.float32)
    return TokenRecord(
        step,
        request_id,
        learner=lp,
        behaviour=lp - 0.01,
        entropy=rng.uniform(0, 3, n).astype(np.float32),
        weight=np.minimum(np.exp(0.01 * np.ones(n)), 2.0).astype(np.float32),
        ratio=np.ones(n, np.float32),
        clipped=[0, n - 1],
    )


def test_records_read_back_within_float16(tmp_path: Path) -> None:
    log = TokenLog(tmp_path)
    written = [token_record("a", 40), token_record("b", 7, seed=1)]
    size = log.append(written)
    assert size == (tmp_path / "tokens.jsonl").stat().st_size
    assert size / 47 < 20  # bytes per token, the five arrays and the clipped list included
    log.append([token_record("a", 40, step=3, seed=2)])
    got = read_tokens(tmp_path)
    assert sorted(got) == ["a", "b"] and got["a"].step == 3  # the latest step's record
    b = got["b"]
    for name in ("learner", "behaviour", "entropy", "weight", "ratio"):
        assert np.allclose(getattr(b, name), getattr(written[1], name), rtol=1e-3, atol=1e-3)
    assert b.clipped == [0, 6]
    TokenLog(tmp_path, dp_rank=1).append([token_record("c", 3)])
    assert sorted(read_tokens(tmp_path)) == ["a", "b", "c"]


def test_a_torn_last_line_is_skipped_and_a_bad_line_named(tmp_path: Path) -> None:
    TokenLog(tmp_path).append([token_record("a", 5)])
    path = tmp_path / "tokens.jsonl"
    whole = path.read_text()
    path.write_text(whole + whole[: len(whole) // 2])  # the learner still writing
    assert list(read_tokens(tmp_path)) == ["a"]
    bad = json.loads(whole)
    bad["entropy"] = bad["entropy"][:4]  # arrays of different lengths
    path.write_text(json.dumps(bad) + "\n" + whole)
    with pytest.raises(TokenLogError, match=r"tokens.jsonl:1: not a token record"):
        read_tokens(tmp_path)


def test_rows_are_spread_and_move_each_step() -> None:
    assert pick_rows(8, 3, 0) == [0, 2, 5]
    assert pick_rows(8, 3, 1) == [1, 3, 6]
    assert pick_rows(3, 5, 4) == [0, 1, 2] and pick_rows(0, 2, 1) == []
    assert all(len(pick_rows(16, 4, s)) == 4 for s in range(20))


def test_the_view_maps_each_parts_record_to_its_trained_positions() -> None:
    rec = record(1)  # 13 tokens: 6 of prompt, 7 trained
    rec = dataclasses.replace(
        rec,
        input_ids=rec.input_ids * 2,
        loss_mask=rec.loss_mask * 2,
        logprobs=rec.logprobs * 2,
        versions=rec.versions * 2,
        turn_spans=[(6, 13), (19, 26)],
        parts=[(0, 13), (13, 26)],
    )
    first, second = token_record(rec.request_id, 7), token_record(part_id(rec.request_id, 1), 7)
    shown, problems = trained_tokens(rec, {rec.request_id: first}, lambda ids: f"<{ids[0]}>")
    assert sorted(shown) == list(range(6, 13)) and not problems
    assert shown[6][0] == "<6>" and shown[6][1] == round(float(first.learner[0]), 3)
    assert [shown[i][6] for i in range(6, 13)] == [1, 0, 0, 0, 0, 0, 1]
    both = {rec.request_id: first, second.request_id: second}
    shown, _ = trained_tokens(rec, both, str)
    assert sorted(shown) == [*range(6, 13), *range(19, 26)]
    assert shown[19][3] == round(float(second.entropy[0]), 3)
    wrong = {rec.request_id: token_record(rec.request_id, 5)}
    shown, problems = trained_tokens(rec, wrong, str)
    assert not shown and problems == [
        "part 1: the token log holds 5 tokens, the episode trained 7: not shown"
    ]
