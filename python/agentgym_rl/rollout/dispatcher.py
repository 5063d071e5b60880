"""The continuous rollout loop: admit groups, run episodes, stream finished groups.

Contract:
- No round barrier. A new group (one task, `group_size` episodes) starts as soon as
  `TrajectoryBuffer.try_admit` allows it; each episode is its own asyncio task.
- The learner's version is read from `version_source` (the engine's loaded weights) and pushed
  into the buffer; an episode's turn budget comes from the schedule at its dispatch version.
- Finished groups are popped, encoded and sent by one sender task; the blocking send runs in a
  thread. On `TransportTimeout` the group goes back with `requeue_front`: ready groups pile up,
  the buffer's admission stops (backpressure), nothing is lost, and streaming resumes when a
  learner takes groups again.
- `stop()` (SIGTERM): admission stops, in-flight episodes get `drain_timeout_s` to finish, the
  rest are cancelled and their groups aborted (counted), ready groups are flushed for at most
  `flush_timeout_s` (not waiting on a learner whose link is lost: a finished run's is gone), and
  `run()` returns a `DispatchSummary`.
- The source is a `TaskSource`, a `TaskMix` or a `Curriculum` (told every finished episode's
  outcome). With a finite one (or `max_groups`), `run()` also returns once everything admitted
  has been sent.
- With an `InFlightSizer` (`buffer.in_flight: auto`), the buffer's in-flight cap is set every
  `resize_every_s` from the window's time in the engine over the episodes' time alive.
- With `judges` (an env's `reward.source` names a judge), that env's finished episodes are held
  until their group's last one ends, then the group is judged (`judging/groups.py`) in that
  episode's task while the loop goes on, and goes to the buffer rescored. A group the judge
  cannot score is dropped: its episodes counted aborted, the ledger saying aborted, the judge's
  counters its failure.
- With a `GroupLedger`, every group is recorded as dispatched, then ready, filtered or aborted;
  a ready one then as sent, dropped as stale or (at exit) unsent (`wire/ledger.py`): the run's
  group accounting, which counts the groups a killed server had in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from agentgym_rl import _core
from agentgym_rl.episode.agent import Played
from agentgym_rl.episode.log import EpisodeLog
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.types import Engine, EpisodePlan
from agentgym_rl.judging.groups import GroupJudge, judge_counters
from agentgym_rl.judging.judge import JudgeFailed
from agentgym_rl.rollout.curriculum import Tasks, note_outcome
from agentgym_rl.rollout.in_flight import NO_TOTALS, EngineTotals, InFlightSizer
from agentgym_rl.rollout.pending import PendingTasks
from agentgym_rl.rollout.schedule import TurnSchedule
from agentgym_rl.rollout.sink import LearnerStream
from agentgym_rl.rollout.status import StatusSink
from agentgym_rl.wire.ledger import GroupLedger, group_key

log = logging.getLogger(__name__)


class Player(Protocol):
    """What plays an episode: the agent loop, or a user's own agent behind the gateway."""

    metrics: RolloutMetrics

    @property
    def engine(self) -> Engine: ...

    async def play(self, plan: EpisodePlan) -> Played: ...


@dataclass
class DispatchSummary:
    """How a `run()` ended; every admitted group is in exactly one buffer bucket."""

    groups_sent: int
    episodes: int
    aborted_episodes: int
    unsent_groups: int
    buffer: dict[str, int] = field(default_factory=dict)


class Dispatcher:
    """Runs the loop described in the module docstring."""

    def __init__(
        self,
        agent: Player,
        buffer: _core.TrajectoryBuffer,
        source: Tasks,
        schedule: TurnSchedule,
        stream: LearnerStream,
        *,
        version_source: Callable[[], int],
        metrics: RolloutMetrics | None = None,
        status: StatusSink | None = None,
        status_interval_s: float = 5.0,
        poll_s: float = 0.05,
        drain_timeout_s: float = 30.0,
        flush_timeout_s: float = 10.0,
        max_groups: int | None = None,
        episode_log: EpisodeLog | None = None,
        ledger: GroupLedger | None = None,
        sizer: InFlightSizer | None = None,
        resize_every_s: float = 1.0,
        judges: Mapping[str, GroupJudge] | None = None,
    ) -> None:
        self.agent, self.buffer, self.source = agent, buffer, source
        self.schedule, self.stream = schedule, stream
        self.version_source = version_source
        self.metrics = metrics if metrics is not None else agent.metrics
        self.status, self.status_interval_s = status, status_interval_s
        self.poll_s, self.drain_timeout_s = poll_s, drain_timeout_s
        self.flush_timeout_s, self.max_groups = flush_timeout_s, max_groups
        self.episode_log = episode_log  # finished episodes, for `agentgym-rl show`
        self.ledger = ledger
        self.sizer, self.resize_every_s = sizer, resize_every_s
        self.judges = dict(judges or {})
        # a judged env's finished episodes, by group, until the group's last one ends
        self._held: dict[int, list[tuple[EpisodePlan, Played, asyncio.Task[None] | None]]] = {}
        self._sized = NO_TOTALS  # the server's totals at the last resize
        if sizer is not None:
            buffer.max_in_flight = sizer.first
        self._queued: deque[tuple[int, str]] = deque()  # the buffer's ready queue, as keys
        self._keys: dict[int, str] = {}  # ledger keys of the groups in flight
        self.groups: dict[int, list[asyncio.Task[None]]] = {}
        self.admitted = 0
        self.tasks = PendingTasks(source)  # admits through it: a refused task is held
        self._stopping = False
        self._sender_done = False
        self._wake = asyncio.Event()  # an episode ended, a group was aborted, or stop()
        self._more = asyncio.Event()  # the sender may have work

    def stop(self) -> None:
        """Stop admitting and wind down (safe to call from a signal handler in the loop)."""
        self._stopping = True
        self._wake.set()

    @property
    def exhausted(self) -> bool:
        """No more groups will be admitted."""
        if self._stopping or (self.max_groups is not None and self.admitted >= self.max_groups):
            return True
        return self.tasks.exhausted

    def sync_version(self) -> None:
        version = int(self.version_source())
        if version > self.buffer.version:
            self.buffer.set_version(version)

    def admit(self) -> int:
        """Start every group capacity allows now; returns how many started."""
        started = 0
        while not self.exhausted:
            task = self.tasks.take()
            if task is None:
                break
            ticket = self.buffer.try_admit(task.item_id, task.env)
            if ticket is None:
                self.tasks.put_back(task)
                break
            self.admitted += 1
            started += 1
            budget = self.schedule.budget(ticket.dispatch_version, task.env)
            key = group_key(task.item_id, ticket.group_id)
            self._keys[ticket.group_id] = key
            if self.ledger is not None:
                self.ledger.write({"dispatched": key, "episodes": self.buffer.group_size})
            self.groups[ticket.group_id] = [
                asyncio.create_task(
                    self._episode(
                        ticket.group_id,
                        EpisodePlan(
                            task, ticket.dispatch_version, budget, f"g{ticket.group_id}-e{i}"
                        ),
                    )
                )
                for i in range(self.buffer.group_size)
            ]
        return started

    async def _episode(self, group_id: int, plan: EpisodePlan) -> None:
        try:
            with self.metrics.living():
                played = await self.agent.play(plan)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("episode %s failed; aborting its group", plan.request_id)
            self._abort_group(group_id, exclude=asyncio.current_task())
            return
        if played.failure is not None:
            log.warning("episode %s: env failure: %s", plan.request_id, played.failure)
        note_outcome(self.source, plan.task, played)
        judge = self.judges.get(plan.task.env)
        if judge is None:
            self._add(group_id, plan, played)
        else:
            await self._judged(group_id, plan, played, judge)
        self._wake.set()

    def _add(self, group_id: int, plan: EpisodePlan, played: Played) -> None:
        """A finished (and, where judged, rescored) episode: logged, then into its group."""
        if self.episode_log is not None:
            self.episode_log.record(played, plan, group_id)
        if group_id in self.groups:
            outcome = self.buffer.add_episode(group_id, list(played.samples))
            if outcome != "pending":
                del self.groups[group_id]
                key = self._keys.pop(group_id, "")
                self._more.set()
                if outcome == "ready":
                    self._queued.append((group_id, key))
                self._record(outcome, key)  # "ready" or "filtered"

    async def _judged(
        self, group_id: int, plan: EpisodePlan, played: Played, judge: GroupJudge
    ) -> None:
        """Hold the episode; the group's last one has the group judged, then adds them all."""
        if group_id not in self.groups:
            return  # its group was aborted
        held = self._held.setdefault(group_id, [])
        held.append((plan, played, asyncio.current_task()))  # type: ignore[arg-type]
        if len(held) < self.buffer.group_size:
            return
        try:
            rescored = await judge.rescore([p for _, p, _ in held], plan.task.reference)
        except JudgeFailed as e:
            log.warning("group %d (%s) not judged, dropped: %s", group_id, plan.task.item_id, e)
            self._drop_unjudged(group_id)
            return
        except Exception:
            log.exception("group %d (%s): judging failed; dropped", group_id, plan.task.item_id)
            self._drop_unjudged(group_id)
            return
        self._held.pop(group_id, None)
        for (p_plan, _, _), p in zip(held, rescored, strict=True):
            self._add(group_id, p_plan, p)

    def _drop_unjudged(self, group_id: int) -> None:
        """A group its judge could not score: its episodes aborted, the ledger says so."""
        self.metrics.aborted_episodes += len(self._held.pop(group_id, []))
        self.groups.pop(group_id, None)
        self.buffer.abort_group(group_id)
        self._record("aborted", self._keys.pop(group_id, ""))

    def _record(self, event: str, key: str) -> None:
        if self.ledger is not None and key:
            self.ledger.write({event: key})

    def _abort_group(self, group_id: int, exclude: asyncio.Task[None] | None = None) -> None:
        tasks = self.groups.pop(group_id, None)
        if tasks is None:
            return
        # held for their judge: finished, but never trained
        held = self._held.pop(group_id, [])
        self.metrics.aborted_episodes += sum(t is not None and t.done() for _, _, t in held)
        for t in tasks:
            if t is not exclude and not t.done():
                t.cancel()
                self.metrics.aborted_episodes += 1
        if exclude is not None:
            self.metrics.aborted_episodes += 1
        self.buffer.abort_group(group_id)
        self._record("aborted", self._keys.pop(group_id, ""))
        self._wake.set()

    async def _send_ready(self, deadline: float | None = None) -> bool:
        """Send ready groups until none is left; False if the learner stopped taking them."""
        while (group := self.buffer.pop_ready()) is not None:
            while self._queued and self._queued[0][0] != group.group_id:
                self._record("stale", self._queued.popleft()[1])  # the buffer dropped it
            queued = self._queued.popleft() if self._queued else (group.group_id, "")
            payload = _core.encode_group(group)
            try:
                await asyncio.to_thread(self.stream.send, payload)
            except _core.TransportTimeout:
                self.buffer.requeue_front(group)
                self._queued.appendleft(queued)
                self.metrics.send_timeouts += 1
                return False
            except BaseException:
                self.buffer.requeue_front(group)  # a fatal transport error keeps the group too
                self._queued.appendleft(queued)
                raise
            self._record("sent", queued[1])
            self.metrics.record_sent(group, self.buffer.version)
            if deadline is not None and time.monotonic() > deadline:
                return self.buffer.counters()["ready"] == 0
        return True

    async def _sender(self) -> None:
        """Sends while the loop runs; a timed-out send already waited, so retry at once."""
        while not self._sender_done:
            if await self._send_ready():
                await self._more.wait()
                self._more.clear()

    def _report(self) -> None:
        if self.status is not None:
            counters = self.buffer.counters()
            record = self.metrics.snapshot(counters, version=int(self.version_source()))
            record["max_in_flight"] = self.buffer.max_in_flight
            if self.sizer is not None and self.sizer.share is not None:
                # `in_flight: auto`'s measured share of an episode's life spent in the engine
                record["engine_share"] = round(self.sizer.share, 4)
            if self.sizer is not None and self.sizer.fits is not None:
                record["engine_fits"] = self.sizer.fits  # requests its KV cache holds at once
            # what must stay flat over a long run (`agentgym-rl soak` reads these)
            record["live_episodes"] = sum(not t.done() for g in self.groups.values() for t in g)
            record["asyncio_tasks"] = len(asyncio.all_tasks())
            if self.judges:
                record.update(judge_counters(self.judges))
            self.status.write(record)

    def _resize(self) -> None:
        """Set the in-flight cap from the last window (see `rollout/in_flight.py`)."""
        if self.sizer is None:
            return
        m = self.metrics
        now = EngineTotals(
            m.request_seconds(),
            m.episode_seconds(),
            m.prompt_tokens + m.generated_tokens,
            m.generate_calls,
        )
        cap = self.sizer.size_window(self._sized, now)
        self._sized = now
        if cap is not None:
            self.buffer.max_in_flight = cap

    def _idle(self) -> bool:
        c = self.buffer.counters()
        return self.exhausted and not self.groups and c["ready"] == 0

    async def run(self) -> DispatchSummary:
        sender = asyncio.create_task(self._sender())
        next_report = time.monotonic() + self.status_interval_s
        next_resize = time.monotonic() + self.resize_every_s
        try:
            while not self._stopping and not self._idle() and not sender.done():
                self.sync_version()
                if time.monotonic() >= next_resize:
                    self._resize()
                    next_resize = time.monotonic() + self.resize_every_s
                self.admit()
                self._more.set()
                self._wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll_s)
                if time.monotonic() >= next_report:
                    self._report()
                    next_report = time.monotonic() + self.status_interval_s
            self._stopping = True
            await self._finish_episodes()
        finally:
            self._sender_done = True
            self._more.set()
            await sender  # never cancelled mid-send: a popped group is sent or requeued
        await self._flush()
        self._report()
        c = self.buffer.counters()
        for _, key in self._queued:
            self._record("unsent", key)
        return DispatchSummary(
            groups_sent=self.metrics.groups_sent,
            episodes=self.metrics.episodes,
            aborted_episodes=self.metrics.aborted_episodes,
            unsent_groups=c["ready"],
            buffer=c,
        )

    async def _finish_episodes(self) -> None:
        """Give in-flight episodes `drain_timeout_s`, then cancel the rest (groups aborted)."""
        pending = [t for tasks in self.groups.values() for t in tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=self.drain_timeout_s)
        cancelled = [t for tasks in self.groups.values() for t in tasks]
        for group_id in list(self.groups):
            self._abort_group(group_id)
        if cancelled:
            await asyncio.gather(*cancelled, return_exceptions=True)

    async def _flush(self) -> None:
        """Send what is ready and wait for acknowledgements, for at most `flush_timeout_s`;
        ready groups wait for no learner that is gone (a finished run's: sends to it only time
        out, which kept every such exit the whole `flush_timeout_s`)."""
        deadline = time.monotonic() + self.flush_timeout_s
        while (
            self.buffer.counters()["ready"] and time.monotonic() < deadline and self.stream.linked()
        ):
            await self._send_ready(deadline)
        remaining = max(0.1, deadline - time.monotonic())
        try:
            await asyncio.to_thread(self.stream.flush, remaining)
        except _core.TransportError as e:
            log.warning("not every sent group was acknowledged before exit: %s", e)
