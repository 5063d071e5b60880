"""Where the learner's groups come from: rank 0 receives them, every data-parallel rank gets its
share.

Contract. `GroupSource.next_groups(receiver, publisher, version, stop)` returns this rank's
groups for the next optimizer step, or None (stopped, or `receive.idle_timeout_s` passed with
no usable group: `idle_s` then says how long it waited). Global rank 0 receives
`groups_per_step` payloads from `receiver` (the rollout servers' `GroupReceiver`), admitting each
through the shared `GroupIntake` at policy `version` (malformed groups rejected, stale ones
dropped, both counted) and keeping each admitted group's ledger key in `taken`. Between two
receives it serves `publisher` (rollout servers that join get the current weights). While
nothing usable arrives it writes a record to `log_dir/waiting.jsonl` every `WAIT_NOTE_S` (the
progress line reads it; a `waiting_s` 0 record when groups flow again) and logs a warning every
`IDLE_WARN_S` with the reason (`intake.stall_reason`). With more than one rank, rank 0
broadcasts the payloads, the intake counters and `idle_s`; data-parallel rank r decodes every
dp-th payload from r.

`record_used(step)` and `record_unsent()` write the group ledger's `used` / `unsent` records for
the keys in `taken` (no-ops without a ledger).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import torch

from agentgym_rl.auth import RefusalLog
from agentgym_rl.config.learn import LearnConfig
from agentgym_rl.learner.intake import GroupIntake
from agentgym_rl.learner.links import GroupInbox, WeightOutbox
from agentgym_rl.learner.model import ParallelLayout
from agentgym_rl.wire import WireGroup, decode_group
from agentgym_rl.wire.ledger import group_key

log = logging.getLogger(__name__)

IDLE_WARN_S = 60.0
"""Seconds between two "waiting for groups" warnings while rank 0 waits."""
WAIT_NOTE_S = 10.0
"""Seconds between two records in `waiting.jsonl` while rank 0 waits."""


class GroupSource:
    """The groups of one learner rank, step after step (see the module docstring)."""

    def __init__(self, config: LearnConfig, layout: ParallelLayout, intake: GroupIntake) -> None:
        self.config = config
        self.layout = layout
        self.intake = intake
        self.taken: list[str] = []
        """Ledger keys of the groups taken for the next step (rank 0)."""
        self.idle_s: float | None = None
        """Set when the last receive ended on `receive.idle_timeout_s`."""
        self.refusals = RefusalLog("groups (learner)")
        """Group messages refused for want of a valid signature."""

    def next_groups(
        self,
        receiver: GroupInbox | None,
        publisher: WeightOutbox | None,
        version: int,
        stop: threading.Event | None = None,
    ) -> list[WireGroup] | None:
        """This rank's share of the next step's groups (None: stop; `idle_s` set on timeout)."""
        rank0 = self.layout.rank == 0
        payloads = self._receive(receiver, publisher, version, stop) if rank0 else None
        if self.layout.world_size > 1:
            box: list[Any] = [payloads, self.intake.counters(), self.idle_s]
            torch.distributed.broadcast_object_list(box, src=0)
            payloads, self.idle_s = box[0], box[2]
            self.intake.restore(box[1])
        if payloads is None:
            return None
        mine = payloads[self.layout.dp_rank :: self.layout.dp_size]
        return [decode_group(p) for p in mine]

    def idle_summary(self) -> str:
        c = self.intake.counters()
        return (
            f"received so far: {c['received']} groups, {c['used']} used, "
            f"{sum(c['rejected'].values())} rejected, {c['dropped_stale']} dropped as stale"
        )

    def record_used(self, step: int) -> None:
        """Ledger: the taken groups went into optimizer step `step`."""
        if self.intake.ledger is not None:
            self.intake.ledger.write({"used": self.taken, "step": step})
        self.taken = []

    def record_unsent(self) -> None:
        """Ledger: the taken groups' step never ran (the run ended first)."""
        if self.intake.ledger is not None:
            for key in self.taken:
                self.intake.ledger.write({"unsent": key})
            self.taken = []

    def _receive(
        self,
        receiver: GroupInbox | None,
        publisher: WeightOutbox | None,
        version: int,
        stop: threading.Event | None,
    ) -> list[bytes] | None:
        """Rank 0: `groups_per_step` admitted payloads (None when stopped, or when nothing
        usable arrived for `receive.idle_timeout_s`)."""
        if receiver is None:
            raise RuntimeError("rank 0 of a learner receives groups: it needs a receiver")
        n = self.config.groups_per_step
        out: list[bytes] = []
        timeout = self.config.receive.idle_timeout_s
        last = warned = noted = time.monotonic()
        while len(out) < n:
            if stop is not None and stop.is_set():
                return None
            busy = publisher is not None and publisher.serve(0.05)
            got = receiver.recv(0.01 if busy else self.config.receive.poll_s)
            self._log_refusals(receiver)
            now = time.monotonic()
            payload = None if got is None else got[1]
            group = None if payload is None else self.intake.admit(payload, version)
            if group is not None and payload is not None:
                out.append(payload)
                self.taken.append(group_key(group.task_id, group.group_id))
                if now - last >= WAIT_NOTE_S:
                    self._note_waiting(version, 0.0, "")
                last = warned = noted = now
                continue
            if timeout is not None and now - last >= timeout:
                self.idle_s = now - last
                return None
            if now - noted >= WAIT_NOTE_S:
                noted = now
                self._note_waiting(version, now - last, self.intake.stall_reason(version))
            if now - warned >= IDLE_WARN_S:
                warned = now
                log.warning(
                    "waiting %.0f s for groups: %s (%s)",
                    now - last,
                    self.intake.stall_reason(version),
                    self.idle_summary(),
                )
        return out

    def _log_refusals(self, receiver: GroupInbox) -> None:
        """Log the messages the receiver refused for want of a valid signature."""
        for peer, reason in getattr(receiver, "take_refusals", list)():
            self.refusals.note(peer, reason)

    def _note_waiting(self, step: int, seconds: float, reason: str) -> None:
        record = {"time": time.time(), "step": step, "waiting_s": seconds, "reason": reason}
        path = Path(self.config.log_dir) / "waiting.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps(record) + "\n")
