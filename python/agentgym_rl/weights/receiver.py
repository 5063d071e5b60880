"""The weight receiver of one rollout server: the `WeightSubscriber` as a task of its event loop.

Contract: `WeightReceiver.start(endpoint, engine, hold=lock)` (None without an endpoint) runs a
`WeightSubscriber` as a task on the running loop and applies each verified update with
`engine.update_weights(version, tensors)` (the engine must have it, e.g. `VllmEngine`), taking
`hold` first: a held-out evaluation that holds the lock delays updates until it is done (relaying
to other servers goes on meanwhile: it does not need the engine). Tokens
sampled afterwards carry the new version. `until_current()` returns once this server holds the
learner's version (at once for a fresh run): the rollout server awaits it before anything
generates, so a server that joins a run mid-way never generates with outdated weights.
`stop()` stops the subscriber after the message in hand (an update being applied finishes
first) and closes its socket. A failed subscriber is logged; the weights then stay frozen.
The subscriber (torch, ZeroMQ) is imported only when an endpoint is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Protocol

log = logging.getLogger(__name__)


class VersionedEngine(Protocol):
    """An engine whose policy version is known (`update_weights` is looked up when needed)."""

    @property
    def version(self) -> int: ...


class WeightReceiver:
    """The weight subscriber task of one service: applies updates to the engine until stopped."""

    def __init__(self, subscriber: Any, task: asyncio.Task[None], stop_event: asyncio.Event):
        self.subscriber = subscriber
        self.task = task
        self._stop = stop_event

    @classmethod
    def start(
        cls,
        endpoint: str | None,
        engine: VersionedEngine,
        *,
        hold: asyncio.Lock,
        relay_host: str | None = "auto",
        secret: bytes | None = None,
    ) -> WeightReceiver | None:
        """Connect to the learner's publisher at `endpoint` (None: no receiver); each update
        takes `hold` first (a held-out evaluation holds it with `hold_weights`). The subscriber
        binds its relay endpoint on `relay_host` (see `relay_bind_host`; None: no relaying);
        with `secret` every weight message is signed and verified."""
        if endpoint is None:
            return None
        update = getattr(engine, "update_weights", None)
        if update is None:
            raise TypeError(
                f"weights_endpoint is set but {type(engine).__name__} has no update_weights"
            )
        from agentgym_rl.weights.subscriber import WeightSubscriber

        subscriber = WeightSubscriber(
            endpoint, last_version=int(engine.version), relay=relay_host, secret=secret
        )

        async def apply(version: int, tensors: dict[str, Any]) -> None:
            if hold.locked():
                log.info("weights: version %d waits for the held-out evaluation", version)
            async with hold:
                seconds = await update(version, tensors)
            log.info("weights: version %d applied in %.2fs", version, seconds or 0.0)

        stop_event = asyncio.Event()
        task = asyncio.create_task(subscriber.serve(apply, stop_event), name="weight-subscriber")
        task.add_done_callback(_log_failure)
        log.info("weights: subscribed to %s at version %d", endpoint, engine.version)
        return cls(subscriber, task, stop_event)

    async def until_current(self, report_every_s: float = 30.0) -> None:
        """Wait until this server holds the learner's version (at once for a fresh run): a
        server that joins a run mid-way generates nothing with outdated weights."""
        sub = self.subscriber
        t0 = time.monotonic()
        current = asyncio.ensure_future(sub.current.wait())
        try:
            while not current.done():
                await asyncio.wait(
                    {current, self.task},
                    timeout=report_every_s,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if current.done():
                    break
                if self.task.done():
                    failure = None if self.task.cancelled() else self.task.exception()
                    if failure is not None:
                        raise failure  # e.g. the learner holds another secret
                    raise RuntimeError("weights: the subscriber stopped while waiting")
                learner = (
                    "has not answered"
                    if sub.learner_version is None
                    else (f"is at version {sub.learner_version}")
                )
                log.warning(
                    "weights: waiting %.0f s for the learner at %s (it %s; this server holds "
                    "version %d)",
                    time.monotonic() - t0,
                    sub.endpoint,
                    learner,
                    sub.assembler.last_version,
                )
        finally:
            current.cancel()
        if sub.assembler.last_version > 0:
            log.info("weights: joined the run at version %d", sub.assembler.last_version)

    @property
    def applied_versions(self) -> list[int]:
        return list(self.subscriber.applied_versions)

    async def stop(self, timeout_s: float = 60.0) -> None:
        """Stop after the message in hand (an update being applied completes), then close."""
        self._stop.set()
        try:
            done, _ = await asyncio.wait({self.task}, timeout=timeout_s)
            if not done:
                log.warning("weights: subscriber did not stop within %.0fs; cancelled", timeout_s)
                self.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self.task
        finally:
            self.subscriber.close()


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("weights: subscriber failed; weights stay frozen", exc_info=task.exception())


__all__ = ["WeightReceiver"]
