"""Headline figures of the benches, for `benches/run.py`'s closing table.

Contract: a bench calls `figure(...)` once per headline figure; it prints one line,
`figure: {json}`, which `run.py` collects from the bench's output (`parse`) and sets in one table
(`table`): the figure, its baseline and its ceiling where it has them, the ratio to each (how far
above the baseline, how close to the ceiling) and its target. A ratio reads the same way for every
figure: above 1 is better than the baseline, 1 is the ceiling (`lower_is_better` flips a time).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from records import RUN_ENV, default_folder, main_argv, new_record, write

PREFIX = "figure: "


@dataclass(frozen=True)
class Figure:
    bench: str
    name: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    ceiling: float | None = None
    ceiling_name: str = ""
    target: str = ""
    lower_is_better: bool = False

    def ratio(self, other: float | None) -> float | None:
        """How this figure stands against `other` (baseline or ceiling): > 1 is better."""
        if other is None or other == 0 or self.value == 0:
            return None
        return other / self.value if self.lower_is_better else self.value / other


_COLLECTED: list[Figure] = []
_STARTED = time.monotonic()


def figure(bench: str, name: str, value: float, unit: str, **reference: Any) -> None:
    """Print one headline figure (see `Figure` for the reference fields). A bench run alone
    (not under `benches/run.py`) writes a record of its figures at its exit (`records.py`)."""
    found = Figure(bench, name, float(value), unit, **reference)
    print(PREFIX + json.dumps(asdict(found)), flush=True)
    if not _COLLECTED and not os.environ.get(RUN_ENV):
        atexit.register(_write_alone)
    _COLLECTED.append(found)


def _write_alone() -> None:
    quick = "--quick" in sys.argv
    record = new_record(sorted({f.bench for f in _COLLECTED}), quick, main_argv())
    for bench in record["settings"]["benches"]:
        record["benches"][bench] = {"seconds": round(time.monotonic() - _STARTED, 1)}
    record["figures"] = [asdict(f) for f in _COLLECTED]
    print(f"record: {write(record, default_folder(quick))}")


def parse(line: str) -> Figure | None:
    """The figure a bench's output line carries, or None."""
    if not line.startswith(PREFIX):
        return None
    try:
        return Figure(**json.loads(line[len(PREFIX) :]))
    except (ValueError, TypeError):
        return None


def run_script(script: Path, argv: list[str], indent: str = "") -> tuple[int, list[Figure]]:
    """Run a bench script as a child that writes no record of its own (its caller's is the
    record): its exit status and its figures, its other output passed through (indented)."""
    import subprocess

    cmd = [sys.executable, str(script), *argv]
    found: list[Figure] = []
    env = {**os.environ, RUN_ENV: "1"}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1, env=env) as bench:
        assert bench.stdout is not None
        for line in bench.stdout:
            fig = parse(line.rstrip("\n"))
            if fig is None:
                print(f"{indent}{line}", end="", flush=True)
            else:
                found.append(fig)
    return bench.returncode, found


def _num(x: float | None) -> str:
    if x is None:
        return ""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _ratio(x: float | None) -> str:
    if x is None:
        return ""
    return "> 1000x" if x > 1000 else f"{x:.2f}x"  # an idle share near 0 against the sync one


def table(figures: list[Figure]) -> str:
    """Every figure in one markdown table, in the order given."""
    head = "| bench | figure | value | baseline | vs baseline | ceiling | of ceiling | target |"
    lines = [head, "|---|---|---:|---|---:|---|---:|---|"]
    for f in figures:
        base = f"{_num(f.baseline)} ({f.baseline_name})" if f.baseline is not None else ""
        ceil = f"{_num(f.ceiling)} ({f.ceiling_name})" if f.ceiling is not None else ""
        lines.append(
            f"| {f.bench} | {f.name} | {_num(f.value)} {f.unit} | {base} | "
            f"{_ratio(f.ratio(f.baseline))} | {ceil} | {_ratio(f.ratio(f.ceiling))} | {f.target} |"
        )
    return "\n".join(lines)
