"""Where the learner's checkpoints are, without torch: `<root>/step_<n>/`, complete once the
`COMPLETE` mark is written (see `checkpoint.py` for what a checkpoint holds). Benches and tools
that only look for checkpoints import this instead of the Megatron-loading `checkpoint.py`."""

from __future__ import annotations

import re
from pathlib import Path

STEP_DIR = re.compile(r"^step_(\d+)$")


def complete_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """`(step, dir)` of every complete checkpoint under `root`, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        m = STEP_DIR.match(child.name)
        if m and child.is_dir() and (child / "COMPLETE").is_file():
            found.append((int(m.group(1)), child))
    return sorted(found)


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint directory, or None."""
    found = complete_checkpoints(root)
    return found[-1][1] if found else None
