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


def test_a_start_up_phase_shows_its_childs_latest_line(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """While `train` creates the model its own output says how far that is (a log file's view:
    one line per change, at most every few seconds; a terminal's: on the bar's line)."""
    import io

    from rich.console import Console

    from agentgym_rl.supervise import progress

    out = io.StringIO()
    view = progress.ProgressView(10, Console(file=out, force_terminal=False, width=200))
    clock = iter([100.0, 101.0, 106.0, 112.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    view.phase("model", "playing 2000 babyai tasks with random valid actions")
    view.phase("model", "warm-up step 70/700 loss 2.134 (40 s)")  # 1 s later: held back
    view.phase("model", "warm-up step 70/700 loss 2.134 (40 s)")
    view.phase("model", "warm-up step 70/700 loss 2.134 (40 s)")  # unchanged: not again
    assert out.getvalue().splitlines() == [
        "train: model: playing 2000 babyai tasks with random valid actions",
        "train: model: warm-up step 70/700 loss 2.134 (40 s)",
    ]
