"""Group intake: decode, validate and staleness-filter groups arriving from rollout servers.

Contract. `GroupIntake.admit(payload, version)` returns the decoded `WireGroup` when it may be
trained on at policy `version`, else None with the reason counted (and logged at WARNING):

* rejected (`rejected[reason]`, the group is malformed; training continues): any codec error
  (``schema_version`` for an unknown schema version, ``wire_format`` otherwise), ``empty``
  (no samples or an empty sample), ``length_mismatch`` (per-token arrays of different lengths),
  ``nan_reward`` (a reward that is not finite), ``bad_logprob`` (a generated token's log-prob
  not finite or > 0), ``token_out_of_vocab`` (an id outside the model's vocabulary);
* dropped (`dropped_stale`): the group's oldest generated token came from a policy more than
  `max_staleness` versions behind `version`.

Accounting: ``used = received - rejected - dropped``; `counters()` returns all of it as plain
ints (checkpointed with the trainer so a resumed run keeps counting).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from typing import Any

import numpy as np

from agentgym_rl._core import InconsistentLengthError, SchemaVersionError
from agentgym_rl.learner.links import Ledger
from agentgym_rl.wire import WireGroup, decode_group
from agentgym_rl.wire.ledger import group_key

log = logging.getLogger(__name__)


class GroupRejected(ValueError):
    """A group that must not be trained on; `reason` is the counter key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def oldest_version(group: WireGroup) -> int | None:
    """The smallest policy version over the group's generated tokens (None: none generated)."""
    versions = [
        int(s.tokens.versions[s.tokens.loss_mask > 0].min())
        for s in group.samples
        if bool((s.tokens.loss_mask > 0).any())
    ]
    return min(versions) if versions else None


def validate_group(group: WireGroup, vocab_size: int) -> None:
    """Raise `GroupRejected` when `group` cannot be trained on (see the module docstring)."""
    if not group.samples:
        raise GroupRejected("empty", "group has no samples")
    for i, s in enumerate(group.samples):
        t = s.tokens
        n = len(t)
        if n == 0:
            raise GroupRejected("empty", f"sample {i} has no tokens")
        lens = {k: int(getattr(t, k).shape[0]) for k in ("loss_mask", "logprobs", "versions")}
        if any(v != n for v in lens.values()) or t.input_ids.ndim != 1:
            raise GroupRejected("length_mismatch", f"sample {i}: {n} ids but {lens}")
        if not math.isfinite(s.reward):
            raise GroupRejected("nan_reward", f"sample {i}: reward {s.reward}")
        gen = t.logprobs[t.loss_mask > 0]
        if gen.size and not (bool(np.isfinite(gen).all()) and float(gen.max()) <= 1e-6):
            raise GroupRejected("bad_logprob", f"sample {i}: generated log-prob not finite or > 0")
        if int(t.input_ids.max()) >= vocab_size:
            raise GroupRejected(
                "token_out_of_vocab", f"sample {i}: id {int(t.input_ids.max())} >= {vocab_size}"
            )


def _decode(payload: bytes) -> WireGroup:
    try:
        return decode_group(payload)
    except SchemaVersionError as e:
        raise GroupRejected("schema_version", str(e)) from None
    except InconsistentLengthError as e:
        raise GroupRejected("length_mismatch", str(e)) from None
    except Exception as e:  # every other codec error (WireFormatError subclasses)
        raise GroupRejected("wire_format", str(e)) from None


class GroupIntake:
    """Decode + validate + staleness filter with counters (one per learner, on rank 0)."""

    def __init__(self, vocab_size: int, max_staleness: int, ledger: Ledger | None = None) -> None:
        self.ledger = ledger
        """Where each rejected or stale group's key is recorded (`wire/ledger.py`)."""
        self.vocab_size = vocab_size
        self.max_staleness = max_staleness
        self.received = 0
        self.dropped_stale = 0
        self.rejected: Counter[str] = Counter()
        self.stale_run = 0
        """Groups dropped as stale since the last admitted one (what a stall is made of)."""
        self.stale_newest: int | None = None
        """The newest token version among those groups: where their rollout servers are."""

    def admit(self, payload: bytes, version: int) -> WireGroup | None:
        self.received += 1
        group: WireGroup | None = None
        try:
            group = _decode(payload)
            validate_group(group, self.vocab_size)
        except GroupRejected as rej:
            self.rejected[rej.reason] += 1
            log.warning("rejected group: %s", rej)
            # a group that decoded has a key its rollout server's ledger knows
            key = (
                f"?#{self.received}" if group is None else group_key(group.task_id, group.group_id)
            )
            self._record("rejected", key)
            return None
        oldest = oldest_version(group)
        if oldest is not None and version - oldest > self.max_staleness:
            self.dropped_stale += 1
            self.stale_run += 1
            newest = max(int(s.tokens.versions.max()) for s in group.samples)
            self.stale_newest = max(newest, self.stale_newest or 0)
            log.info(
                "dropped group %d: oldest token v%d, policy v%d", group.group_id, oldest, version
            )
            self._record("stale", group_key(group.task_id, group.group_id))
            return None
        self.stale_run, self.stale_newest = 0, None
        return group

    def stall_reason(self, version: int) -> str:
        """Why nothing usable arrived, in words (for the learner's log and the progress line)."""
        if self.stale_run:
            return (
                f"rollout servers are at v{self.stale_newest}, learner at v{version}: "
                f"{self.stale_run} groups in a row dropped as stale (max_staleness "
                f"{self.max_staleness}); a rollout server without the learner's weights?"
            )
        if not self.received:
            return "no group has arrived yet (rollout servers still starting?)"
        return "no groups arrive from any rollout server"

    def _record(self, bucket: str, key: str) -> None:
        if self.ledger is not None:
            self.ledger.write({bucket: key})

    @property
    def used(self) -> int:
        return self.received - sum(self.rejected.values()) - self.dropped_stale

    def counters(self) -> dict[str, Any]:
        return {
            "received": self.received,
            "dropped_stale": self.dropped_stale,
            "rejected": dict(self.rejected),
            "used": self.used,
        }

    def restore(self, counters: dict[str, Any]) -> None:
        self.received = int(counters["received"])
        self.dropped_stale = int(counters["dropped_stale"])
        self.rejected = Counter({k: int(v) for k, v in counters["rejected"].items()})
