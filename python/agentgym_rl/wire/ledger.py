"""Where every group went: one JSONL ledger per process (read back by `report/groups.py`).

Contract. A group is named by `group_key(task_id, group_id)` (rollout servers hand out group
ids unique across their restarts, and the learner decodes both from the group). Each process appends to `<its log_dir>/groups.jsonl`, flushed
line by line, so a process killed with SIGKILL leaves a ledger that is true up to its death:

* a process start: `{"event": "start", "pid"}`; a clean exit: `{"event": "exit"}`;
* a rollout server: `{"dispatched": key, "episodes": n}` (its episodes started), then one of
  `{"ready": key}` (a complete group entered its queue), `{"filtered": key}` (complete, but
  dropped as carrying no signal) or `{"aborted": key}` (an episode failed, or the server stopped
  first); a ready group then `{"sent": key}` (handed to the transport), `{"stale": key}` (dropped
  by its own staleness check) and, at a clean exit, `{"unsent": key}` for each group still
  queued. The synchronous loop writes no dispatch records;
* the learner: `{"stale": key}`, `{"rejected": key}` as groups arrive, `{"used": [keys],
  "step": n}` once step n is taken, `{"unsent": key}` at a clean exit for groups it took for a
  step it never took, `{"resumed_from": c}` when it resumes from checkpoint c (the steps after
  c that an earlier learner took are void: their training was lost with it).

`report.groups.account(run_dir)` reads these back into the run's group accounting.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO

LEDGER_FILE = "groups.jsonl"


def group_key(task_id: str, group_id: int) -> str:
    return f"{task_id}#{group_id}"


class GroupLedger:
    """Appends one process's ledger records (see the module docstring)."""

    def __init__(self, log_dir: Path | str) -> None:
        path = Path(log_dir) / LEDGER_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO | None = path.open("a")
        self.write({"event": "start", "pid": os.getpid()})

    def write(self, record: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def close(self, *, clean: bool = True) -> None:
        if self._file is not None:
            if clean:
                self.write({"event": "exit"})
            self._file.close()
            self._file = None
