"""What a soak measures and how it is judged: samples of a process tree's memory and descriptors,
the rule that says they stayed flat, and the table they are reported in.

Contract: `tree_figures(pid)` reads resident MB and open descriptors of a process and all its
`descendants` from /proc. A `Reading` is one process's figures at one instant; `Reading.highest`
keeps the larger of each, and `Reading.sample` turns one into a `Sample` with the highest figures
since the sample before. `flat(samples, capacity)` names what grew after warm-up; `table`
renders samples as markdown; `write_result` stores a `SoakResult` as JSON.

Why the peaks: a web env server's tree holds a Chromium renderer per live page (100-300 MB each)
and, while a browser is replaced, two browsers. Its memory at one instant says how many pages
were open then (miniwob's swung 1.1-2.3 GB between samples with no trend), so comparing two
instants judges the load, not a leak. The highest figure of each 1,000 episodes has seen the
full load every time; a leak raises it as it raises everything else.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

GROWTH = 0.10
"""Largest growth allowed after the first sample (10%)."""
ROLLOUT = "rollout server"


@dataclass
class Sample:
    """One process at one point of the soak; `peak_*`: the highest figure read since the
    previous sample, this one included (None in results from before peaks were read)."""

    episodes: int
    process: str
    rss_mb: float
    open_fds: int
    live_episodes: int
    asyncio_tasks: int
    peak_rss_mb: float | None = None
    peak_open_fds: int | None = None
    peak_live_episodes: int | None = None

    @property
    def high_rss_mb(self) -> float:
        return self.rss_mb if self.peak_rss_mb is None else self.peak_rss_mb

    @property
    def high_open_fds(self) -> int:
        return self.open_fds if self.peak_open_fds is None else self.peak_open_fds

    @property
    def high_live_episodes(self) -> int:
        return self.live_episodes if self.peak_live_episodes is None else self.peak_live_episodes


@dataclass
class SoakResult:
    """One env's soak; `stopped`: ended by Ctrl-C/SIGTERM before its episodes, samples so far."""

    env: str
    episodes: int
    seconds: float
    groups_received: int
    env_steps: int = 0
    samples: list[Sample] = field(default_factory=list)
    stopped: bool = False


def tree_figures(pid: int) -> tuple[float, int]:
    """Resident MB and open descriptors of `pid` and all its descendants."""
    rss_kb, fds = 0, 0
    for p in [pid, *descendants(pid)]:
        try:
            status = Path(f"/proc/{p}/status").read_text()
            rss_kb += next(
                int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS")
            )
            fds += len(os.listdir(f"/proc/{p}/fd"))
        except (OSError, StopIteration):
            continue  # exited between the listing and the read
    return rss_kb / 1024, fds


def descendants(pid: int) -> list[int]:
    """Pids of every descendant of `pid` (its children, theirs, and so on), from /proc."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                kids = [int(k) for k in task.read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def flat(samples: list[Sample], capacity: int) -> list[str]:
    """What did not stay flat, in words (empty: everything did). Per process, from its first
    sample after warm-up (the second; the first is taken at the start) to its last: resident
    memory and open descriptors (their peaks since the sample before, where read) grew by at
    most `GROWTH` (descriptors: plus a few), asyncio tasks beside the live episodes by at most
    `GROWTH` plus two; live episodes never exceeded `capacity` (episodes in flight at most: each
    one that ended was closed)."""
    grew = []
    for process in dict.fromkeys(s.process for s in samples):
        mine = [s for s in samples if s.process == process][1:]
        if len(mine) < 2:
            continue
        first, last = mine[0], mine[-1]
        tasks = [s.asyncio_tasks - (s.live_episodes if process == ROLLOUT else 0) for s in mine]
        figures = [
            ("RSS MB", first.high_rss_mb, last.high_rss_mb, 0.0),
            ("open fds", first.high_open_fds, last.high_open_fds, 4),
            ("asyncio tasks besides episodes", tasks[0], tasks[-1], 2),
        ]
        for what, a, b, slack in figures:
            if b > a * (1 + GROWTH) + slack:
                span = f"{a:g} at {first.episodes} -> {b:g} at {last.episodes}"
                grew.append(f"{process} {what}: {span}")
        most = max(s.high_live_episodes for s in mine)
        if most > capacity:
            grew.append(f"{process} live episodes: {most} > {capacity} in flight at most")
    return grew


@dataclass(frozen=True)
class Reading:
    """One process's figures at one instant."""

    rss_mb: float
    open_fds: int
    live_episodes: int
    asyncio_tasks: int

    def highest(self, other: Reading | None) -> Reading:
        if other is None:
            return self
        return Reading(
            max(self.rss_mb, other.rss_mb),
            max(self.open_fds, other.open_fds),
            max(self.live_episodes, other.live_episodes),
            max(self.asyncio_tasks, other.asyncio_tasks),
        )

    def sample(self, episodes: int, process: str, peak: Reading) -> Sample:
        return Sample(
            episodes,
            process,
            round(self.rss_mb, 1),
            self.open_fds,
            self.live_episodes,
            self.asyncio_tasks,
            round(peak.rss_mb, 1),
            peak.open_fds,
            peak.live_episodes,
        )


def write_result(result: SoakResult, out: Path) -> Path:
    path = out / result.env / "soak.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(result), indent=1))
    return path


def table(results: list[SoakResult]) -> str:
    """A markdown table: every sample of every process (peaks since the sample before in
    brackets)."""
    lines = [
        "| env | process | episodes | RSS MB (peak) | open fds (peak) | live episodes (peak) "
        "| asyncio tasks |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for s in r.samples:
            lines.append(
                f"| {r.env} | {s.process} | {s.episodes:,} | {s.rss_mb:.0f} ({s.high_rss_mb:.0f}) "
                f"| {s.open_fds} ({s.high_open_fds}) "
                f"| {s.live_episodes} ({s.high_live_episodes}) | {s.asyncio_tasks} |"
            )
    return "\n".join(lines)
