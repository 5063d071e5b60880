"""The rollout server's status: a one-line status of each metrics snapshot, and JSONL records.

Contract: `StatusSink.write(record)` appends the snapshot (`episode/metrics.py`'s
`RolloutMetrics.snapshot()`) as one JSON line to `<log_dir>/metrics.jsonl` and prints it as one
status line (rich): a live line on a terminal, a plain line per snapshot otherwise, none with
`quiet`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text


def _rate(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.1%}"


def status_line(record: dict[str, Any]) -> str:
    """One human line from a snapshot."""
    buf = record.get("buffer", {})
    return (
        f"[bold]rollout[/] {record['uptime_s']:7.0f}s "
        f"tok/s {record['generated_tokens_per_s']:8.1f}  "
        f"steps/s {record['env_steps_per_s']:7.1f}  "
        f"eps/s {record['episodes_per_s']:5.2f}  "
        f"idle {record['engine_idle_ratio']:4.0%}  "
        f"turns {record['turns_mean']:4.1f}/{record['turns_max']}  "
        f"success {_rate(record.get('success_rate'))}  "
        f"sent {record['groups_sent']}  running {buf.get('running', 0)} "
        f"ready {buf.get('ready', 0)}  env_fail {record['env_failures']}  "
        f"drift {record['drift']}"
    )


class StatusSink:
    """Writes snapshots: a live status line on a terminal (a plain line per snapshot otherwise)
    and JSON lines in `log_dir`."""

    def __init__(self, log_dir: Path | None, *, quiet: bool = False) -> None:
        self.console = Console(stderr=True, highlight=False)
        self.quiet = quiet
        self.live: Live | None = None
        self.path: Path | None = None
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            self.path = log_dir / "metrics.jsonl"

    def write(self, record: dict[str, Any]) -> None:
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(json.dumps(record) + "\n")
        if self.quiet:
            return
        line = Text.from_markup(status_line(record))
        if not self.console.is_terminal:
            self.console.print(line, soft_wrap=True)
            return
        if self.live is None:
            self.live = Live(line, console=self.console, auto_refresh=False)
            self.live.start()
        self.live.update(line, refresh=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
