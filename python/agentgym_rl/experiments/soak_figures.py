"""What a soak measures and how it is judged: samples of a process tree's memory and descriptors,
the rule that says they stayed flat, and the table they are reported in.

Contract: `tree_figures(pid)` reads resident MB and open descriptors of a process and all its
`descendants` from /proc. A `Reading` is one process's figures at one instant; a `Stretch`
gathers the readings between two samples and `Stretch.sample` turns the last one into a
`Sample` that also carries the stretch's means and highest. `flat(samples, capacity)` names
what grew after warm-up; `table` renders samples as markdown; `write_result` stores a
`SoakResult` as JSON.

Why means: a web env server's tree holds a Chromium renderer per live page (100-300 MB each)
and, while a browser is replaced, two browsers. Its memory at one instant says how many pages
were open then (miniwob's swung 1.0-2.3 GB between samples with no trend), so comparing two
instants judges the load, not a leak. The highest reading of a stretch is no steadier: it is
the stretch's one worst moment (miniwob's descriptors peaked at 892-1,103 per 1,000 episodes, in
no order). The mean of a stretch's readings, about two a second, averages the load over
thousands of episodes; a leak raises it as it raises everything else.
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
    """One process at one point of the soak. Besides the figures at that instant, over the
    readings since the sample before (this one included): `peak_*`, the highest, and `mean_*`,
    the mean (None in results from before they were read)."""

    episodes: int
    process: str
    rss_mb: float
    open_fds: int
    live_episodes: int
    asyncio_tasks: int
    peak_rss_mb: float | None = None
    peak_open_fds: int | None = None
    peak_live_episodes: int | None = None
    mean_rss_mb: float | None = None
    mean_open_fds: float | None = None
    mean_live_episodes: float | None = None
    mean_asyncio_tasks: float | None = None

    @property
    def level_rss_mb(self) -> float:
        """What the flatness rule compares: the stretch's mean where read, else the instant."""
        return self.rss_mb if self.mean_rss_mb is None else self.mean_rss_mb

    @property
    def level_open_fds(self) -> float:
        return self.open_fds if self.mean_open_fds is None else self.mean_open_fds

    @property
    def level_tasks(self) -> float:
        """Asyncio tasks the flatness rule compares: the stretch's mean where read, else the
        instant; for the rollout server less its live episodes (one task each)."""
        if self.mean_asyncio_tasks is None or self.mean_live_episodes is None:
            tasks, live = float(self.asyncio_tasks), float(self.live_episodes)
        else:
            tasks, live = self.mean_asyncio_tasks, self.mean_live_episodes
        return tasks - live if self.process == ROLLOUT else tasks

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
    at_rest_fds: dict[str, list[int]] = field(default_factory=dict)
    """Process -> its open descriptors at rest: an env server's [before the rollout server
    started, after it stopped], the rollout server's [at its first mark, at its last] with no live
    episode: what a leak leaves behind, whatever the load did in between."""
    at_rest_tasks: dict[str, list[int]] = field(default_factory=dict)
    """The rollout server's asyncio tasks at the same rest readings: under load an agent
    episode runs several (its connections'), so tasks follow the load there too."""


def tree_figures(pid: int) -> tuple[float, int]:
    """Resident MiB and open descriptors of `pid` and all its descendants (a process that
    exits meanwhile counts for nothing). The one reader of a process tree's memory: the soak,
    the model bench's peaks and the SciWorld bench's server use it."""
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


def children(pid: int) -> list[int]:
    """Pids of the direct children of `pid`, from /proc (none once it has exited)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out += [int(k) for k in task.read_text().split()]
        except OSError:
            continue
    return out


def descendants(pid: int) -> list[int]:
    """Pids of every descendant of `pid` (its children, theirs, and so on), from /proc."""
    out, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out


def flat(
    samples: list[Sample],
    capacity: int,
    growth: float = GROWTH,
    at_rest: dict[str, list[int]] | None = None,
    tasks_at_rest: dict[str, list[int]] | None = None,
) -> list[str]:
    """What did not stay flat, in words (empty: everything did). Per process, from its level
    after warm-up to its last: resident memory and open descriptors grew by at most `growth`
    (descriptors: plus a few), asyncio tasks beside the live episodes by at most `GROWTH` plus
    two; live episodes never exceeded `capacity` (episodes in flight at most: each one that
    ended was closed). The level after warm-up is the mean of the first stretch that starts
    after it (the third sample's; the first is taken at the start) where means were read, else
    the instant of the second sample. A process in `at_rest` (`SoakResult.at_rest_fds`) has its
    descriptors judged at rest instead: at its last reading at most a few more than at its first;
    one in `tasks_at_rest` (`SoakResult.at_rest_tasks`) its asyncio tasks (at most two more).
    Under load descriptors follow the live episodes (an HTTP agent opens a connection an episode
    to the env server and one to the endpoint), coming and going with the load: 185-211 per
    stretch, in no order, for BabyAI's env server under 256 agent episodes."""
    grew = []
    rest, tasks_rest = at_rest or {}, tasks_at_rest or {}
    for process, (before, after) in rest.items():
        if after > before + 4:
            grew.append(f"{process} open fds at rest: {before} before -> {after} after")
    for process, (before, after) in tasks_rest.items():
        if after > before + 2:
            grew.append(f"{process} asyncio tasks at rest: {before} before -> {after} after")
    for process in dict.fromkeys(s.process for s in samples):
        mine = [s for s in samples if s.process == process][1:]
        most = max((s.high_live_episodes for s in mine), default=0)
        if most > capacity:
            grew.append(f"{process} live episodes: {most} > {capacity} in flight at most")
        if mine and mine[0].mean_rss_mb is not None:
            mine = mine[1:]  # the second sample's means cover the warm-up
        if len(mine) < 2:
            continue
        first, last = mine[0], mine[-1]
        figures = [
            ("RSS MB", first.level_rss_mb, last.level_rss_mb, 0.0),
            ("open fds", first.level_open_fds, last.level_open_fds, 4),
            ("asyncio tasks besides episodes", first.level_tasks, last.level_tasks, 2),
        ]
        if process in tasks_rest:  # judged at rest above
            del figures[2]
        if process in rest:
            del figures[1]
        for what, a, b, slack in figures:
            if b > a * (1 + growth) + slack:
                span = f"{a:g} at {first.episodes} -> {b:g} at {last.episodes}"
                grew.append(f"{process} {what}: {span}")
    return grew


@dataclass(frozen=True)
class Reading:
    """One process's figures at one instant."""

    rss_mb: float
    open_fds: int
    live_episodes: int
    asyncio_tasks: int


@dataclass
class Stretch:
    """The readings of one process since its last sample: how many, their sums and highest."""

    readings: int = 0
    rss_mb: float = 0.0
    open_fds: int = 0
    live_episodes: int = 0
    asyncio_tasks: int = 0
    peak: Reading | None = None

    def add(self, r: Reading) -> None:
        self.readings += 1
        self.rss_mb += r.rss_mb
        self.open_fds += r.open_fds
        self.live_episodes += r.live_episodes
        self.asyncio_tasks += r.asyncio_tasks
        p = self.peak or r
        self.peak = Reading(
            max(p.rss_mb, r.rss_mb),
            max(p.open_fds, r.open_fds),
            max(p.live_episodes, r.live_episodes),
            max(p.asyncio_tasks, r.asyncio_tasks),
        )

    def sample(self, episodes: int, process: str, now: Reading) -> Sample:
        """A sample of `now`, with this stretch's means and highest (`now` among them)."""
        self.add(now)
        assert self.peak is not None
        n = self.readings
        return Sample(
            episodes,
            process,
            round(now.rss_mb, 1),
            now.open_fds,
            now.live_episodes,
            now.asyncio_tasks,
            round(self.peak.rss_mb, 1),
            self.peak.open_fds,
            self.peak.live_episodes,
            round(self.rss_mb / n, 1),
            round(self.open_fds / n, 1),
            round(self.live_episodes / n, 2),
            round(self.asyncio_tasks / n, 2),
        )


def write_result(result: SoakResult, out: Path) -> Path:
    path = out / result.env / "soak.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(result), indent=1))
    return path


def table(results: list[SoakResult]) -> str:
    """A markdown table: every sample of every process, its figures at that instant and, where
    read, the mean and highest of the readings since the sample before."""
    lines = [
        "| env | process | episodes | RSS MB: now, mean, peak | open fds: now, mean, peak "
        "| live episodes: now, mean, peak | asyncio tasks: now, mean |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for s in r.samples:
            rss = _figures(s.rss_mb, s.mean_rss_mb, s.peak_rss_mb, ".0f")
            fds = _figures(s.open_fds, s.mean_open_fds, s.peak_open_fds, ".0f")
            live = _figures(s.live_episodes, s.mean_live_episodes, s.peak_live_episodes, ".1f")
            head = f"| {r.env} | {s.process} | {s.episodes:,} "
            tasks = _figures(s.asyncio_tasks, s.mean_asyncio_tasks, None, ".1f")
            lines.append(f"{head}| {rss} | {fds} | {live} | {tasks} |")
    return "\n".join(lines)


def _figures(now: float, mean: float | None, peak: float | None, fmt: str) -> str:
    if mean is None:
        return f"{now:.0f}"
    if peak is None:
        return f"{now:.0f}, {mean:{fmt}}"
    return f"{now:.0f}, {mean:{fmt}}, {peak:.0f}"
