"""The eval progress display without a terminal: a line per finished episode, and one warning
when most turns run to the token cap without a parsable action."""

from __future__ import annotations

import io

from rich.console import Console

from agentgym_rl.episode.scoring import EvalRecord
from agentgym_rl.evaluation import progress
from agentgym_rl.evaluation.progress import EvalProgress


def _record(turns: int, runaway: int, success: bool = False) -> EvalRecord:
    return EvalRecord(
        env="babyai",
        category="GoToLocal",
        item_id="1",
        success=success,
        reward=float(success),
        status="turn_cap",
        turns=turns,
        runaway_turns=runaway,
    )


def _bar(total: int) -> tuple[EvalProgress, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    return EvalProgress(total, console=console), out


def test_a_line_per_episode_where_no_bar_can_draw(monkeypatch) -> None:
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    bar, out = _bar(3)
    with bar:
        bar.add(_record(5, 0, success=True))
        bar.add(_record(5, 0))
        bar.add(_record(5, 0))
    lines = [line for line in out.getvalue().splitlines() if line.startswith("eval: ")]
    assert [line.split(",")[0] for line in lines] == [
        "eval: 1/3 episodes",
        "eval: 2/3 episodes",
        "eval: 3/3 episodes",
    ]
    assert "success 33.3%" in lines[-1]
    assert "warning" not in out.getvalue()


def test_the_last_episode_is_always_printed(monkeypatch) -> None:
    monkeypatch.setattr(progress, "LINE_EVERY_S", 3600.0)
    bar, out = _bar(3)
    with bar:
        for _ in range(3):
            bar.add(_record(5, 0))
    lines = [line for line in out.getvalue().splitlines() if line.startswith("eval: ")]
    assert [line.split(",")[0] for line in lines] == ["eval: 1/3 episodes", "eval: 3/3 episodes"]


def test_runaway_turns_warn_once_after_enough_episodes() -> None:
    bar, out = _bar(10)
    with bar:
        for _ in range(progress.RUNAWAY_AFTER - 1):
            bar.add(_record(5, 5))
        assert "warning" not in out.getvalue()  # too few episodes to say
        for _ in range(4):
            bar.add(_record(5, 4))
    text = out.getvalue()
    assert text.count("warning: ") == 1
    assert f"{5 * (progress.RUNAWAY_AFTER - 1) + 4} of {5 * progress.RUNAWAY_AFTER} turns" in text


def test_no_warning_when_most_turns_stop() -> None:
    bar, out = _bar(10)
    with bar:
        for _ in range(10):
            bar.add(_record(5, 2))
    assert "warning" not in out.getvalue()
