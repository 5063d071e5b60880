"""The group accounting of a run, from the ledgers its processes wrote (`wire/ledger.py`).

Contract: `account(run_dir)` replays the ledgers of all the run's learner and rollout processes
(every restart and `--resume` included) and puts every group a rollout server made in exactly
one bucket: made = used + stale + rejected + unsent + lost. `unsent` is what the run's end left
untrained (queued, in transit, or taken for a step never taken); `lost` is what went down with a
killed process (a process whose ledger has no clean exit): groups queued in a killed rollout
server, groups in flight to or taken by a learner that was killed, and groups of the steps it
took after its last checkpoint (voided by the next learner's `resumed_from`). Where a learner
was killed, groups in transit at any stop count as lost with it (the ledgers share no clock to
tell the two apart). `trained_twice` lists keys used in two surviving steps (must stay empty).

Where the rollout ledgers carry dispatch records, a second balance covers the groups before they
are made: dispatched = made + filtered + aborted + in flight in a killed rollout server, the last
also in episodes (their work lost with the server: in agent mode, the users' episodes).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym_rl.report.records import read_jsonl
from agentgym_rl.wire.ledger import LEDGER_FILE


@dataclass
class Accounting:
    """The buckets of `account`; `made == sum of the rest` is checked by `balanced`."""

    made: int = 0
    used: int = 0
    stale: int = 0
    rejected: int = 0
    unsent: int = 0
    lost: int = 0
    lost_with: Counter[str] = field(default_factory=Counter)
    """`lost` by cause: "rollout killed", "learner killed"."""
    killed: Counter[str] = field(default_factory=Counter)
    """Processes that ended without a clean exit, by role."""
    trained_twice: list[str] = field(default_factory=list)
    dispatched: int = 0
    """Groups whose episodes a rollout server started (0 where no ledger records dispatch)."""
    filtered: int = 0
    aborted: int = 0
    in_flight_killed: int = 0
    """Groups dispatched and not yet complete in a rollout server that was killed."""
    episodes_in_flight_killed: int = 0

    @property
    def balanced(self) -> bool:
        total = self.used + self.stale + self.rejected + self.unsent + self.lost
        started = self.made + self.filtered + self.aborted + self.in_flight_killed
        return self.made == total and (not self.dispatched or self.dispatched == started)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON types (dataclasses.asdict would rebuild the Counters from item pairs)."""
        out: dict[str, Any] = {k: getattr(self, k) for k in ("made", "used", "stale", "rejected")}
        out.update(unsent=self.unsent, lost=self.lost, lost_with=dict(self.lost_with))
        out.update(killed=dict(self.killed), trained_twice=list(self.trained_twice))
        for k in (
            "dispatched",
            "filtered",
            "aborted",
            "in_flight_killed",
            "episodes_in_flight_killed",
        ):
            out[k] = getattr(self, k)
        return {**out, "balanced": self.balanced, "line": self.line()}

    def line(self) -> str:
        causes = ", ".join(f"{n} {why}" for why, n in sorted(self.lost_with.items()))
        return (
            f"{self.made} groups made = {self.used} used + {self.stale} stale + "
            f"{self.rejected} rejected + {self.unsent} unsent + {self.lost} lost"
            + (f" ({causes})" if causes else "")
            + (f"; {self.dispatch_line()}" if self.dispatched else "")
        )

    def dispatch_line(self) -> str:
        return (
            f"{self.dispatched} dispatched = {self.made} made + {self.filtered} filtered + "
            f"{self.aborted} aborted + {self.in_flight_killed} in flight in a killed rollout "
            f"server ({self.episodes_in_flight_killed} episodes)"
        )


def _learner(path: Path, acc: Accounting) -> tuple[dict[str, str], set[str]]:
    """Fates the learner gave (key -> bucket) and the keys a killed learner took unused."""
    fate: dict[str, str] = {}
    steps: dict[int, list[str]] = {}
    void: set[str] = set()
    clean = True
    for r in read_jsonl(path):
        if r.get("event") == "start":
            acc.killed["learner"] += 0 if clean else 1
            clean = False
        elif r.get("event") == "exit":
            clean = True
        elif "resumed_from" in r:
            for step in [s for s in steps if s > int(r["resumed_from"])]:
                void.update(steps.pop(step))
        elif "used" in r:
            steps[int(r["step"])] = [str(k) for k in r["used"]]
        for bucket in ("stale", "rejected", "unsent"):
            if bucket in r:
                fate[str(r[bucket])] = bucket
    acc.killed["learner"] += 0 if clean else 1
    seen: set[str] = set()
    for keys in steps.values():
        for key in keys:
            if key in seen:
                acc.trained_twice.append(key)
            seen.add(key)
            fate[key] = "used"
    return fate, void - seen


def account(run_dir: Path | str) -> Accounting:
    """Replay the ledgers of the run in `run_dir` (see the module docstring)."""
    run_dir = Path(run_dir)
    acc = Accounting()
    fate, void = _learner(run_dir / "learn" / LEDGER_FILE, acc)
    for ledger in sorted(run_dir.glob(f"rollout-*/{LEDGER_FILE}")):
        segment: list[str] = []
        in_flight: dict[str, int] = {}  # dispatched, not yet made, filtered or aborted
        records = read_jsonl(ledger)
        for i, r in enumerate(records):
            if "dispatched" in r:
                in_flight[str(r["dispatched"])] = int(r.get("episodes", 0))
                acc.dispatched += 1
            elif "ready" in r:
                segment.append(str(r["ready"]))
                in_flight.pop(str(r["ready"]), None)
                acc.made += 1
            elif "filtered" in r or "aborted" in r:
                bucket = "filtered" if "filtered" in r else "aborted"
                in_flight.pop(str(r[bucket]), None)
                setattr(acc, bucket, getattr(acc, bucket) + 1)
            elif "stale" in r:
                fate.setdefault(str(r["stale"]), "stale")
            elif "unsent" in r:
                fate.setdefault(str(r["unsent"]), "unsent")
            last = i + 1 == len(records) or records[i + 1].get("event") == "start"
            if last:
                killed = r.get("event") != "exit"
                acc.killed["rollout"] += int(killed)
                for key in segment:
                    _settle(acc, fate.get(key), key in void, killed)
                if killed:
                    acc.in_flight_killed += len(in_flight)
                    acc.episodes_in_flight_killed += sum(in_flight.values())
                segment, in_flight = [], {}
    return acc


def _settle(acc: Accounting, fate: str | None, void: bool, rollout_killed: bool) -> None:
    if fate is not None and not void:
        setattr(acc, fate, getattr(acc, fate) + 1)
        return
    if void:
        cause = "learner killed"
    elif rollout_killed:
        cause = "rollout killed"
    elif acc.killed["learner"]:
        cause = "learner killed"  # in flight to, or taken unused by, a learner that was killed
    else:
        acc.unsent += 1  # in flight when the run stopped
        return
    acc.lost += 1
    acc.lost_with[cause] += 1
