"""The run's live view: what the learner's files say reaches the progress line."""

from __future__ import annotations

import json
from pathlib import Path

from agentgym_rl.supervise.progress import RunWatcher


def _append(path: Path, record: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


def test_the_learners_reason_for_waiting_shows_until_it_steps_again(tmp_path: Path) -> None:
    watcher = RunWatcher(tmp_path, max_steps=10)
    learn = tmp_path / "learn"
    _append(learn / "metrics.jsonl", {"step": 15, "tokens_per_s": 100.0})
    assert "waiting" not in watcher.poll().line()
    reason = "rollout servers are at v0, learner at v15: 12 groups in a row dropped as stale"
    _append(learn / "waiting.jsonl", {"step": 15, "waiting_s": 70.4, "reason": reason})
    line = watcher.poll().line()
    assert f"learner waiting 70s: {reason}" in line
    _append(learn / "waiting.jsonl", {"step": 15, "waiting_s": 0.0, "reason": ""})
    _append(learn / "metrics.jsonl", {"step": 16, "tokens_per_s": 100.0})
    state = watcher.poll()
    assert state.step == 16 and "waiting" not in state.line()
