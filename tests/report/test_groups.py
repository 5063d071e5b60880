"""The group ledger's accounting: every group a rollout server made lands in one bucket, and
steps lost with a killed learner do not count as used."""

from __future__ import annotations

import json
from pathlib import Path

from agentgym_rl.report.groups import account
from agentgym_rl.wire.ledger import GroupLedger


def _write(path: Path, records: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def test_a_clean_run_balances_with_nothing_lost(tmp_path: Path) -> None:
    ledger = GroupLedger(tmp_path / "rollout-0")
    for key in "abcde":
        ledger.write({"ready": key})
    ledger.write({"stale": "a"})  # the rollout buffer's own staleness check
    for key in "bcd":
        ledger.write({"sent": key})
    ledger.write({"unsent": "e"})
    ledger.close()
    learner = GroupLedger(tmp_path / "learn")
    learner.write({"rejected": "b"})
    learner.write({"used": ["c"], "step": 1})
    learner.write({"unsent": "d"})  # taken for a step the run ended before
    learner.close()
    acc = account(tmp_path)
    assert (acc.made, acc.used, acc.stale, acc.rejected, acc.unsent, acc.lost) == (5, 1, 1, 1, 2, 0)
    assert acc.balanced and not acc.killed["rollout"] and not acc.killed["learner"]
    assert acc.line() == "5 groups made = 1 used + 1 stale + 1 rejected + 2 unsent + 0 lost"


def test_kills_and_a_resume_are_accounted(tmp_path: Path) -> None:
    rollout = tmp_path / "rollout-0" / "groups.jsonl"
    learn = tmp_path / "learn" / "groups.jsonl"
    # rollout process 1: killed with g3 still queued; process 2 exits cleanly
    _write(rollout, [{"event": "start"}, *({"ready": k} for k in ("g1", "g2", "g3"))])
    _write(rollout, [{"event": "start"}, *({"ready": k} for k in ("h1", "h2", "h3", "h4"))])
    _write(rollout, [{"event": "exit"}])
    # learner 1: steps 1-3, killed after its step-2 checkpoint; learner 2 resumes from 2
    _write(learn, [{"event": "start"}, {"used": ["g1"], "step": 1}, {"used": ["g2"], "step": 2}])
    _write(learn, [{"used": ["h1"], "step": 3}])
    _write(learn, [{"event": "start"}, {"resumed_from": 2}, {"used": ["h2"], "step": 3}])
    _write(learn, [{"used": ["h3"], "step": 4}, {"event": "exit"}])
    acc = account(tmp_path)
    assert acc.killed == {"rollout": 1, "learner": 1}
    assert (acc.made, acc.used, acc.lost) == (7, 4, 3) and acc.balanced
    # g3 went down with the rollout server; h1's step was lost with the learner; h4 was in
    # flight in a run where a learner was killed
    assert acc.lost_with == {"rollout killed": 1, "learner killed": 2}
    assert acc.trained_twice == []


def test_a_group_in_two_surviving_steps_is_reported(tmp_path: Path) -> None:
    _write(tmp_path / "rollout-0" / "groups.jsonl", [{"ready": "x"}, {"event": "exit"}])
    _write(
        tmp_path / "learn" / "groups.jsonl",
        [{"used": ["x"], "step": 1}, {"used": ["x"], "step": 2}, {"event": "exit"}],
    )
    assert account(tmp_path).trained_twice == ["x"]


def test_the_summary_carries_the_accounting_of_a_run_with_kills(tmp_path: Path) -> None:
    from agentgym_rl.report import write_report

    test_kills_and_a_resume_are_accounted(tmp_path)  # the ledgers of a run with two kills
    write_report(tmp_path)
    groups = json.loads((tmp_path / "summary.json").read_text())["groups"]
    assert groups["killed"] == {"rollout": 1, "learner": 1} and groups["balanced"] is True
    assert groups["lost_with"] == {"rollout killed": 1, "learner killed": 2}
    md = (tmp_path / "summary.md").read_text()
    assert "| groups | 7 groups made = 4 used + 0 stale + 0 rejected + 0 unsent + 3 lost" in md


def test_groups_in_flight_in_a_killed_rollout_server_are_counted_with_their_episodes(
    tmp_path: Path,
) -> None:
    rollout = tmp_path / "rollout-0" / "groups.jsonl"
    # process 1: a made, b filtered, c aborted (an episode failed), d and e in flight when killed
    dispatch = [{"dispatched": k, "episodes": 8} for k in "abcde"]
    _write(rollout, [{"event": "start"}, *dispatch, {"ready": "a"}, {"filtered": "b"}])
    _write(rollout, [{"aborted": "c"}])
    # process 2: f made; g still running at a clean stop, so aborted; nothing in flight at exit
    _write(rollout, [{"event": "start"}, {"dispatched": "f", "episodes": 8}, {"ready": "f"}])
    _write(rollout, [{"dispatched": "g", "episodes": 8}, {"aborted": "g"}, {"unsent": "f"}])
    _write(rollout, [{"event": "exit"}])
    _write(tmp_path / "learn" / "groups.jsonl", [{"used": ["a"], "step": 1}, {"event": "exit"}])
    acc = account(tmp_path)
    assert (acc.dispatched, acc.made, acc.filtered, acc.aborted) == (7, 2, 1, 2)
    assert (acc.in_flight_killed, acc.episodes_in_flight_killed) == (2, 16) and acc.balanced
    assert acc.line().endswith(
        "; 7 dispatched = 2 made + 1 filtered + 2 aborted + 2 in flight in a killed rollout "
        "server (16 episodes)"
    )
    assert acc.as_dict()["episodes_in_flight_killed"] == 16
    _write(rollout, [{"event": "start"}, {"dispatched": "h", "episodes": 8}, {"event": "exit"}])
    assert not account(tmp_path).balanced  # a clean exit leaves nothing in flight unrecorded
