"""The processes a test can see on this machine, for "nothing outlived the run" checks."""

from __future__ import annotations

import os
from pathlib import Path


def processes_mentioning(text: str) -> list[str]:
    """Command lines of this machine's processes that mention `text` (the run folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline:
                line = cmdline.replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name}: {line[:200]}")
    return found
