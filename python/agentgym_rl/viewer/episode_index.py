"""A run's episode logs, browsed without loading them: an index of each line's place and scalars.

Contract: `EpisodeIndex(paths)` indexes the run's `episodes.jsonl` files (one per rollout
server) lazily: `page(filter, page, size)` indexes only as many lines as the page needs (the
first page of a million-line log reads its first 50 lines; a filter matching 1% of them, some
5,000), and `grow(budget_s)` indexes on, from where it stopped, for a caller that wants totals
(the viewer's background thread). Each indexed line keeps its byte offset and scalars
(`episode.log.summary_of`: the token arrays are never parsed) in columns (numbers in arrays,
strings as codes into a table), so that a filter over a million rows is one numpy mask.
A file that grows is read on from its last whole line (a run being written; a half-written last
line waits for its newline); a missing file is an empty log; a line that is not an episode is
skipped and counted in `skipped`. `record(ref)` reads one episode whole (`EpisodeRecord`).
Thread-safe: one lock around growth and reads.
"""

from __future__ import annotations

import json
import threading
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from agentgym_rl.episode.log import EpisodeRecord, summary_of

CHUNK_BYTES = 4 << 20
NONE = -1
"""A count the line does not have (logs before format version 3)."""
TEXT_KEYS = ("env", "split", "status", "category", "item_id")
NUMBER_KEYS = ("file", "line", "offset", "version", "turns", "turn_cap", "invalid", "forks")
FLAG_KEYS = ("success", "drift")


@dataclass(frozen=True, slots=True)
class EpisodeFilter:
    """What the episodes table shows; a field left None does not filter."""

    env: str | None = None
    split: str | None = None
    version_min: int | None = None
    version_max: int | None = None
    outcome: str | None = None
    """`success` or `failure`."""
    turns_min: int | None = None
    turns_max: int | None = None
    invalid_min: int | None = None
    drift: bool | None = None
    forks_min: int | None = None
    task: str | None = None
    """An exact task id, or a part of one (`babyai_40` matches every task id holding it)."""

    @classmethod
    def from_query(cls, query: dict[str, str]) -> EpisodeFilter:
        """From the page's query parameters (empty ones ignored); ValueError on a bad value."""

        def num(key: str) -> int | None:
            value = query.get(key, "").strip()
            if not value:
                return None
            try:
                return int(value)
            except ValueError:
                raise ValueError(f"{key} must be a whole number (got {value!r})") from None

        outcome = query.get("outcome") or None
        if outcome not in (None, "success", "failure"):
            raise ValueError(f"outcome must be success or failure (got {outcome!r})")
        drift = {"": None, "yes": True, "no": False}.get(query.get("drift", ""))
        return cls(
            env=query.get("env") or None,
            split=query.get("split") or None,
            version_min=num("version_min"),
            version_max=num("version_max"),
            outcome=outcome,
            turns_min=num("turns_min"),
            turns_max=num("turns_max"),
            invalid_min=num("invalid_min"),
            drift=drift,
            forks_min=num("forks_min"),
            task=query.get("task") or None,
        )


@dataclass(frozen=True, slots=True)
class Page:
    rows: list[dict[str, Any]]
    matched: int
    """Matches among the lines indexed so far (all of them when `complete`)."""
    indexed: int
    complete: bool
    """Every line of every log is indexed: `matched` is the total."""


class _Columns:
    """The indexed lines: numbers in typed arrays, strings as codes into `texts`."""

    def __init__(self) -> None:
        self.numbers = {key: array("q") for key in NUMBER_KEYS}
        self.flags = {key: array("b") for key in FLAG_KEYS}
        self.reward = array("d")
        self.codes = {key: array("i") for key in TEXT_KEYS}
        self.texts: dict[str, list[str]] = {key: [] for key in TEXT_KEYS}
        self._code_of: dict[str, dict[str, int]] = {key: {} for key in TEXT_KEYS}

    def __len__(self) -> int:
        return len(self.reward)

    def code(self, key: str, value: str) -> int:
        table = self._code_of[key]
        found = table.get(value)
        if found is None:
            found = table[value] = len(self.texts[key])
            self.texts[key].append(value)
        return found

    def add(self, file: int, line: int, offset: int, s: dict[str, Any]) -> None:
        n = self.numbers
        n["file"].append(file)
        n["line"].append(line)
        n["offset"].append(offset)
        n["version"].append(int(s["dispatch_version"]))
        n["turns"].append(int(s["turns"]))
        n["turn_cap"].append(int(s["turn_cap"]))
        for key, name in (("invalid", "invalid_turns"), ("forks", "forks")):
            value = s.get(name)
            n[key].append(NONE if value is None else int(value))
        self.flags["success"].append(bool(s["success"]))
        self.flags["drift"].append(bool(s["drift"]))
        self.reward.append(float(s["reward"]))
        for key in TEXT_KEYS:
            value = s.get(key)
            self.codes[key].append(self.code(key, "" if value is None else str(value)))
        if s.get("split") is None:
            self.codes["split"][-1] = self.code("split", "train")

    def column(self, key: str) -> npt.NDArray[Any]:
        tables: tuple[dict[str, array[Any]], ...] = (self.numbers, self.flags, self.codes)
        source = next((t[key] for t in tables if key in t), self.reward)
        if not len(source):
            return np.zeros(0, dtype=source.typecode)
        return np.frombuffer(source, dtype=source.typecode)

    def row(self, i: int) -> dict[str, Any]:
        out: dict[str, Any] = {key: self.numbers[key][i] for key in NUMBER_KEYS}
        out |= {key: bool(self.flags[key][i]) for key in FLAG_KEYS}
        out |= {key: self.texts[key][self.codes[key][i]] for key in TEXT_KEYS}
        out["reward"] = self.reward[i]
        for key in ("invalid", "forks"):
            if out[key] == NONE:
                out[key] = None
        out["ref"] = f"{out['file']}.{out['line']}"
        return out


class _LogFile:
    """Where indexing of one log file stands."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.read_to = 0
        """Bytes indexed (up to the last whole line read)."""
        self.lines = 0
        self.at_end = False

    def read_on(self, limit: int) -> list[tuple[int, bytes]]:
        """Up to about `limit` bytes of whole lines from where indexing stopped, with offsets."""
        try:
            with self.path.open("rb") as f:
                f.seek(self.read_to)
                data = f.read(limit)
        except FileNotFoundError:
            self.at_end = True
            return []
        end = data.rfind(b"\n") + 1
        self.at_end = len(data) < limit
        if end == 0:
            if not self.at_end:  # one line longer than the chunk: read it whole
                return self.read_on(limit * 2)
            return []
        out = []
        start = 0
        while start < end:
            stop = data.index(b"\n", start)
            out.append((self.read_to + start, data[start:stop]))
            start = stop + 1
        self.read_to += end
        return out


class EpisodeIndex:
    """See the module docstring."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.files = [_LogFile(Path(p)) for p in paths]
        self.cols = _Columns()
        self.skipped = 0
        self._lock = threading.RLock()

    @property
    def indexed(self) -> int:
        return len(self.cols)

    @property
    def complete(self) -> bool:
        return all(f.at_end for f in self.files)

    def _grow_once(self) -> bool:
        """Index the next chunk of the first file not at its end; False when all are."""
        for number, f in enumerate(self.files):
            if f.at_end:
                continue
            for offset, line in f.read_on(CHUNK_BYTES):
                f.lines += 1
                if not line.strip():
                    continue
                try:
                    self.cols.add(number, f.lines - 1, offset, summary_of(line))
                except (ValueError, KeyError, TypeError):
                    self.skipped += 1
            return True
        return False

    def grow(self, budget_s: float | None = None) -> bool:
        """Index on (for at most `budget_s`); True when every line is indexed. A file that grew
        since it was last read to its end is read on."""
        deadline = None if budget_s is None else time.monotonic() + budget_s
        with self._lock:
            for f in self.files:
                f.at_end = False
            while self._grow_once():
                if deadline is not None and time.monotonic() > deadline:
                    return False
            return True

    def mask(self, flt: EpisodeFilter) -> npt.NDArray[np.bool_]:
        c = self.cols
        n = len(c)
        keep = np.ones(n, dtype=bool)

        def col(key: str) -> npt.NDArray[Any]:
            return c.column(key)[:n]

        for key in ("env", "split"):
            value = getattr(flt, key)
            if value is not None:
                code = c._code_of[key].get(value)
                keep &= col(key) == (NONE if code is None else code)
        if flt.task is not None:
            codes = [i for i, t in enumerate(c.texts["item_id"]) if flt.task in t]
            keep &= np.isin(col("item_id"), codes)
        if flt.outcome is not None:
            keep &= col("success") == (flt.outcome == "success")
        if flt.drift is not None:
            keep &= col("drift") == flt.drift
        bounds = (
            ("version", flt.version_min, flt.version_max),
            ("turns", flt.turns_min, flt.turns_max),
            ("invalid", flt.invalid_min, None),
            ("forks", flt.forks_min, None),
        )
        for key, low, high in bounds:
            if low is not None:
                keep &= col(key) >= low
            if high is not None:
                keep &= col(key) <= high
        return keep

    def page(self, flt: EpisodeFilter, page: int = 0, size: int = 50) -> Page:
        """Rows `page * size ..` of the episodes `flt` keeps, in log order (indexing on only
        while the page is not yet full)."""
        want = (page + 1) * size
        with self._lock:
            matches = np.flatnonzero(self.mask(flt))
            while len(matches) < want and self._grow_once():
                matches = np.flatnonzero(self.mask(flt))
            rows = [self.cols.row(int(i)) for i in matches[page * size : want]]
            return Page(rows, len(matches), len(self.cols), self.complete)

    def rows(self, flt: EpisodeFilter) -> list[dict[str, Any]]:
        """Every indexed row `flt` keeps (for small selections: one task's episodes)."""
        with self._lock:
            return [self.cols.row(int(i)) for i in np.flatnonzero(self.mask(flt))]

    def record(self, ref: str) -> EpisodeRecord:
        """The episode `ref` (`<file>.<line>`, as rows name it), read whole; KeyError if no
        indexed line has it."""
        with self._lock:
            file, line = (int(x) for x in ref.split("."))
            c = self.cols
            hits = np.flatnonzero((c.column("file") == file) & (c.column("line") == line))
            if not len(hits):
                raise KeyError(ref)
            offset = c.numbers["offset"][int(hits[0])]
            path = self.files[file].path
        with path.open("rb") as f:
            f.seek(offset)
            text = f.readline()
        return EpisodeRecord.from_dict(json.loads(text), f"{path}:{line + 1}")

    def counts(self, key: str, flt: EpisodeFilter) -> dict[str, dict[int, tuple[int, int]]]:
        """Per value of `key` (a text column) and version: (episodes, successes) of the rows
        `flt` keeps, over the lines indexed so far (the overview's training success)."""
        with self._lock:
            keep = self.mask(flt)
            codes = self.cols.column(key)[: len(keep)][keep]
            versions = self.cols.column("version")[: len(keep)][keep]
            wins = self.cols.column("success")[: len(keep)][keep]
            names = list(self.cols.texts[key])
        out: dict[str, dict[int, tuple[int, int]]] = {}
        for code, name in enumerate(names):
            sel = codes == code
            if not sel.any():
                continue
            v, w = versions[sel], wins[sel].astype(np.int64)
            n_by = np.bincount(v, minlength=int(v.max()) + 1)
            s_by = np.bincount(v, weights=w, minlength=int(v.max()) + 1)
            out[name] = {int(k): (int(n_by[k]), int(s_by[k])) for k in np.flatnonzero(n_by)}
        return out

    def texts(self, key: str) -> list[str]:
        with self._lock:
            return list(self.cols.texts[key])
