"""What a run directory holds, read back for plots and summaries.

Contract: `RunRecords.load(run_dir)` reads `learn/metrics.jsonl` (one record per learner step),
`rollout-*/metrics.jsonl` (periodic rollout snapshots, timed), `rollout-*/eval.jsonl` (held-out
evaluations by policy version), `timeline.jsonl` (when the supervisor saw each learner step),
`run.jsonl` (one record per `train` invocation), `children.jsonl` (child starts and exits:
how long creating the model took) and `rollout-*/yardsticks.json` (chance and rule on the
held-out tasks, per env). Missing files are empty lists; malformed lines
are skipped. `step_at(t)` places a timed record on the learner-step axis: the record's own
`version` when it has one, else the last step seen at or before `t`.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file ([] when it does not exist)."""
    try:
        return json_objects(path.read_bytes().splitlines())
    except OSError:
        return []


def json_objects(lines: Iterable[bytes | str]) -> list[dict[str, Any]]:
    """The lines that are JSON objects, parsed; the others (a torn or foreign line) skipped."""
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def read_yardsticks(path: Path) -> dict[str, dict[str, Any]]:
    """The yardsticks a rollout server measured, by env ({} when it measured none)."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    entries = stored.values() if isinstance(stored, dict) else []
    return {e["env"]: e for e in entries if isinstance(e, dict) and isinstance(e.get("env"), str)}


def number(record: dict[str, Any], key: str) -> float | None:
    value = record.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass
class RunRecords:
    """The records of one run directory."""

    run_dir: Path
    learn: list[dict[str, Any]] = field(default_factory=list)
    rollout: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    eval: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    children: list[dict[str, Any]] = field(default_factory=list)
    yardsticks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per env: `{"chance": {category: rate}, "rule": {...} | None, "rule_name", "turn_cap"}`."""
    _times: list[float] = field(default_factory=list)
    _steps: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.run_dir.resolve().name

    @classmethod
    def load(cls, run_dir: Path) -> RunRecords:
        records = cls(run_dir=run_dir, learn=read_jsonl(run_dir / "learn" / "metrics.jsonl"))
        for server in sorted(run_dir.glob("rollout-*")):
            if server.is_dir():
                records.rollout[server.name] = read_jsonl(server / "metrics.jsonl")
                records.eval += read_jsonl(server / "eval.jsonl")
                records.yardsticks.update(read_yardsticks(server / "yardsticks.json"))
        records.runs = read_jsonl(run_dir / "run.jsonl")
        records.children = read_jsonl(run_dir / "children.jsonl")
        seen = [
            (float(r["time"]), int(r["step"]))
            for r in [*read_jsonl(run_dir / "timeline.jsonl"), *records.learn]
            if number(r, "time") is not None and number(r, "step") is not None
        ]
        seen.sort()
        records._times = [t for t, _ in seen]
        records._steps = [s for _, s in seen]
        return records

    def step_at(self, record: dict[str, Any]) -> int:
        """The learner step a rollout record belongs to (0 before the first step)."""
        version = number(record, "version")
        if version is not None:
            return int(version)
        t = number(record, "time")
        if t is None or not self._times:
            return 0
        i = bisect.bisect_right(self._times, t)
        return self._steps[i - 1] if i else 0

    def eval_envs(self) -> list[str]:
        """The envs the held-out evaluations cover, when they cover more than one."""
        envs = {e for r in self.eval if isinstance(r.get("by_env"), dict) for e in r["by_env"]}
        return sorted(envs) if len(envs) > 1 else []

    def eval_by_version(self, env: str | None = None) -> list[tuple[int, float]]:
        """Held-out success per policy version (of `env` alone, or over all envs),
        episode-weighted over rollout servers."""
        sums: dict[int, tuple[float, float]] = {}
        for record in self.eval:
            by_env = record.get("by_env")
            r = by_env.get(env) if env is not None and isinstance(by_env, dict) else record
            if not isinstance(r, dict):
                continue
            version, success = number(record, "version"), number(r, "success")
            if version is None or success is None:
                continue
            weight = number(r, "episodes") or 1.0
            s, w = sums.get(int(version), (0.0, 0.0))
            sums[int(version)] = (s + success * weight, w + weight)
        return [(v, s / w) for v, (s, w) in sorted(sums.items()) if w > 0]

    def yardstick(
        self, env: str | None, category: str = "all"
    ) -> tuple[float | None, float | None]:
        """(chance, rule) of `env` (None: the run's only env) on `category` of its held-out
        tasks; None where not measured (or no rule declared)."""
        if env is None:
            env = next(iter(self.yardsticks)) if len(self.yardsticks) == 1 else None
        sticks = self.yardsticks.get(env or "")
        if not sticks:
            return None, None
        chance, rule = sticks.get("chance") or {}, sticks.get("rule") or {}
        return chance.get(category), rule.get(category)

    def eval_by_category(self, env: str | None = None) -> dict[str, list[tuple[int, float]]]:
        """Held-out success per category and policy version (of `env`, or of the only env),
        episode-unweighted over rollout servers (each server evaluates the same tasks)."""
        acc: dict[str, dict[int, list[float]]] = {}
        for record in self.eval:
            by_env = record.get("by_env")
            r = by_env.get(env) if env is not None and isinstance(by_env, dict) else record
            version = number(record, "version")
            if not isinstance(r, dict) or version is None:
                continue
            for category, rate in (r.get("by_category") or {}).items():
                if isinstance(rate, int | float):
                    acc.setdefault(category, {}).setdefault(int(version), []).append(float(rate))
        return {
            c: [(v, sum(xs) / len(xs)) for v, xs in sorted(by_v.items())]
            for c, by_v in sorted(acc.items())
        }

    def counter_total(self, key: str) -> float:
        """A rollout counter summed over servers and restarts (a counter that drops restarted
        from zero)."""
        total = 0.0
        for records in self.rollout.values():
            last = 0.0
            for r in records:
                value = number(r, key)
                if value is None:
                    continue
                total += value - last if value >= last else value
                last = value
        return total

    def wall_time_s(self) -> float | None:
        spans = [
            r["end"] - r["start"]
            for r in self.runs
            if number(r, "end") is not None and number(r, "start") is not None
        ]
        return sum(spans) if spans else None

    def model_creation_s(self) -> float:
        """Seconds spent creating the model (`init-model` from its start to its exit 0)."""
        started: float | None = None
        total = 0.0
        for r in self.children:
            if r.get("child") != "init-model" or number(r, "time") is None:
                continue
            if r.get("event") == "start":
                started = float(r["time"])
            elif r.get("event") == "exit" and started is not None:
                total, started = total + float(r["time"]) - started, None
        return total
