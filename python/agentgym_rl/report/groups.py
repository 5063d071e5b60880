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

    @property
    def balanced(self) -> bool:
        total = self.used + self.stale + self.rejected + self.unsent + self.lost
        return self.made == total

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON types (dataclasses.asdict would rebuild the Counters from item pairs)."""
        out: dict[str, Any] = {k: getattr(self, k) for k in ("made", "used", "stale", "rejected")}
        out.update(unsent=self.unsent, lost=self.lost, lost_with=dict(self.lost_with))
        out.update(killed=dict(self.killed), trained_twice=list(self.trained_twice))
        return {**out, "balanced": self.balanced, "line": self.line()}

    def line(self) -> str:
        causes = ", ".join(f"{n} {why}" for why, n in sorted(self.lost_with.items()))
        return (
            f"{self.made} groups made = {self.used} used + {self.stale} stale + "
            f"{self.rejected} rejected + {self.unsent} unsent + {self.lost} lost"
            + (f" ({causes})" if causes else "")
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
        records = read_jsonl(ledger)
        for i, r in enumerate(records):
            if "ready" in r:
                segment.append(str(r["ready"]))
                acc.made += 1
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
                segment = []
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
