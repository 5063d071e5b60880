"""The status sink: one JSON line per metrics snapshot, and the one-line status."""

from __future__ import annotations

import json
from pathlib import Path

from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.rollout.status import StatusSink, status_line


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_snapshots_are_json_lines_and_a_status_line(tmp_path: Path) -> None:
    clock = Clock()
    m = RolloutMetrics(clock)
    clock.t += 10.0
    m.generated_tokens = 500
    first = m.snapshot({"running": 2, "ready": 1})
    clock.t += 10.0
    second = m.snapshot()
    sink = StatusSink(tmp_path, quiet=True)
    sink.write(first)
    sink.write(second)
    sink.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["generated_tokens"] for x in lines] == [500, 500]
    assert json.loads(lines[0])["buffer"] == {"running": 2, "ready": 1}
    line = status_line(first)
    assert "tok/s     50.0" in line and "running 2 ready 1" in line
