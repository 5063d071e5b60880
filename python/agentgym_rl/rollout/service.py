"""Assembles one rollout service from a `RolloutConfig` and runs it until done or signalled.

Contract: `run_service(config, engine, sync=...)` builds the env pool, chat tokenizer, task
source, turn schedule, trajectory buffer, learner stream, metrics and either the asynchronous
`Dispatcher` or the reference `SyncLoop`, installs SIGTERM/SIGINT handlers that wind it down
cleanly, runs it, writes the dataset cursor to `<log_dir>/cursor.json` (the group ledger goes
to `<log_dir>/groups.jsonl`, `wire/ledger.py`) and returns the summary. With a learner to take
weights from, nothing is generated before this server holds the learner's version.
Any object satisfying `Engine` works (tests use a scripted one); `serve()` starts vLLM first.

When `config.weights_endpoint` is set, a `WeightSubscriber` runs as a task on the same event
loop and applies each verified update with `engine.update_weights(version, tensors)` (the
engine must have it, e.g. `VllmEngine`): tokens sampled afterwards carry the new version, and
the loop's admission (which reads `engine.version`) sees it at its next poll. The subscriber is
stopped (an update being applied finishes first) and its socket closed on shutdown.

With `config.eval`, a `HeldOutEval` task evaluates held-out tasks on the same engine and pool
(`rollout/held_out.py`, records in `<log_dir>/eval.jsonl`); reaching `eval.final_version` stops
the dispatcher, and the service returns once that final evaluation is written. Finished training
episodes are logged to `<log_dir>/episodes.jsonl` every `episode_log_every` (for `show`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import signal
import time
from pathlib import Path
from typing import Any

from agentgym_rl import _core
from agentgym_rl.config import RolloutConfig
from agentgym_rl.rollout.agent import AgentLoop, EnvSpec
from agentgym_rl.rollout.dataset import Cursor, TaskSource, load_split
from agentgym_rl.rollout.dispatcher import Dispatcher, DispatchSummary
from agentgym_rl.rollout.episode_log import EpisodeLog
from agentgym_rl.rollout.held_out import HeldOutEval
from agentgym_rl.rollout.metrics import RolloutMetrics, StatusSink
from agentgym_rl.rollout.schedule import TurnSchedule
from agentgym_rl.rollout.sink import LearnerStream
from agentgym_rl.rollout.sync_loop import SyncLoop
from agentgym_rl.rollout.types import Engine
from agentgym_rl.trajectory import ChatTokenizer
from agentgym_rl.wire.ledger import GroupLedger

log = logging.getLogger(__name__)
CURSOR_FILE = "cursor.json"


def task_source(config: RolloutConfig) -> TaskSource:
    """The dataset, resumed from `<log_dir>/cursor.json` when `dataset.resume` and it exists."""
    ds = config.dataset
    cursor = Cursor()
    path = config.log_dir / CURSOR_FILE
    if ds.resume and path.exists():
        saved = json.loads(path.read_text())
        cursor = Cursor(int(saved["epoch"]), int(saved["index"]))
    tasks = load_split(ds.split, ds.env)
    return TaskSource(tasks, seed=ds.shuffle_seed, cursor=cursor, epochs=ds.epochs)


def env_pool(config: RolloutConfig) -> _core.EnvPool:
    servers = [
        _core.EnvServer(e.env, a, dialect=e.dialect, max_inflight=e.max_inflight)
        for e in config.envs
        for a in e.addresses
    ]
    p = config.env_pool
    return _core.EnvPool(
        servers,
        health_interval_s=p.health_interval_s,
        step_timeout_s=p.step_timeout_s,
        create_timeout_s=p.reset_timeout_s,
        reset_timeout_s=p.reset_timeout_s,
    )


async def run_service(
    config: RolloutConfig,
    engine: Engine,
    *,
    sync: bool = False,
    chat: ChatTokenizer | None = None,
    quiet: bool = False,
    max_groups: int | None = None,
) -> DispatchSummary:
    """Run the rollout loop on `engine` until the dataset ends, `max_groups`, or a signal.

    With `sync`, `max_groups` is rounded up to whole batches of `buffer.groups_per_step`.
    """
    chat = chat or ChatTokenizer.from_dir(config.tokenizer or config.model)
    stop_ids = getattr(engine, "stop_token_ids", None)
    specs = {
        e.env: EnvSpec(e.action_format, e.system_prompt, e.invalid_penalty) for e in config.envs
    }
    source = task_source(config)
    schedule = TurnSchedule.from_config(config.scaling_inter)
    metrics = RolloutMetrics()
    status = StatusSink(config.log_dir, quiet=quiet)
    stream = LearnerStream(
        config.learner.endpoints,
        sender_id=config.learner.sender_id,
        timeout_s=config.learner.send_timeout_s,
    )
    pool: _core.EnvPool | None = None
    ledger: GroupLedger | None = None
    runner: Dispatcher | SyncLoop
    held_out: HeldOutEval | None = None
    # weight updates wait while this is held; the evaluation holds it only with `hold_weights`
    weights_hold = asyncio.Lock()
    receiver = WeightReceiver.start(config.weights_endpoint, engine, hold=weights_hold)
    if receiver is not None:
        await receiver.until_current()
    if sync:
        runner = SyncLoop(
            engine,
            chat,
            stream,
            source,
            schedule,
            addresses={e.env: e.addresses for e in config.envs},
            envs=specs,
            group_size=config.dataset.group_size,
            groups_per_step=config.buffer.groups_per_step,
            max_model_len=config.engine.max_model_len,
            max_tokens_per_turn=config.engine.max_tokens_per_turn,
            version_source=lambda: engine.version,
            metrics=metrics,
            status=status,
            check_drift=config.check_drift,
        )
    else:
        pool = env_pool(config)
        ledger = GroupLedger(config.log_dir)
        b = config.buffer
        buffer = _core.TrajectoryBuffer(
            group_size=config.dataset.group_size,
            groups_per_step=b.groups_per_step,
            max_staleness=b.max_staleness,
            max_in_flight=b.max_in_flight,
            max_ready=b.max_ready,
            filter_zero_variance=b.filter_zero_variance,
            start_version=int(engine.version),
            # ids unique across restarts of this server (its groups are told apart in the logs)
            first_group_id=time.time_ns() // 1_000_000 << 20,
        )
        agent = AgentLoop(
            engine,
            pool,
            chat,
            envs=specs,
            max_model_len=config.engine.max_model_len,
            max_tokens_per_turn=config.engine.max_tokens_per_turn,
            stop_ids=stop_ids,
            check_drift=config.check_drift,
            metrics=metrics,
        )
        tokenizer_dir = Path(config.tokenizer or config.model)
        runner = Dispatcher(
            agent,
            buffer,
            source,
            schedule,
            stream,
            version_source=lambda: engine.version,
            status=status,
            status_interval_s=config.status_interval_s,
            max_groups=max_groups,
            ledger=ledger,
            episode_log=EpisodeLog.in_dir(
                config.log_dir,
                config.episode_log_every,
                # absolute, so that `show` finds it from any working directory
                tokenizer=str(tokenizer_dir.resolve()) if tokenizer_dir.exists() else None,
            ),
        )
        if config.eval is not None:
            held_out = HeldOutEval(
                config.eval,
                # its own metrics: evaluation episodes never count as training episodes
                AgentLoop(
                    engine,
                    pool,
                    chat,
                    # held-out rewards are the env's scores: the penalty shapes training only
                    envs={k: dataclasses.replace(s, invalid_penalty=0.0) for k, s in specs.items()},
                    max_model_len=config.engine.max_model_len,
                    max_tokens_per_turn=config.engine.max_tokens_per_turn,
                    stop_ids=stop_ids,
                    check_drift=False,
                    metrics=RolloutMetrics(),
                    sampling=(
                        {}
                        if config.eval.temperature is None
                        else {"temperature": config.eval.temperature}
                    ),
                ),
                env=config.dataset.env,
                turn_cap=schedule.max_cap,
                log_dir=config.log_dir,
                on_final=runner.stop,
                hold=weights_hold if config.eval.hold_weights else asyncio.Lock(),
            )
    evaluating = None if held_out is None else asyncio.create_task(held_out.run())

    def on_signal() -> None:
        runner.stop()
        if evaluating is not None:
            evaluating.cancel()

    loop = asyncio.get_running_loop()
    handled = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal)
            handled.append(sig)
    try:
        if isinstance(runner, SyncLoop):
            gps = config.buffer.groups_per_step
            batches = None if max_groups is None else -(-max_groups // gps)
            summary = await runner.run(max_batches=batches)
        else:
            summary = await runner.run()
        if evaluating is not None:
            await _finish_evaluation(evaluating, held_out)
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        if evaluating is not None and not evaluating.done():
            evaluating.cancel()
            await asyncio.gather(evaluating, return_exceptions=True)
        if receiver is not None:
            await receiver.stop()
        if pool is not None:
            await pool.shutdown()
        _close_stream(stream)
        if ledger is not None:
            ledger.close()
        status.close()
        save_cursor(config.log_dir, source.cursor)
    log.info("rollouts finished: %s", summary)
    return summary


def _close_stream(stream: LearnerStream, flush_s: float = 2.0) -> None:
    """Give sent groups a moment to be acknowledged (close drops what is still unacknowledged),
    then log what each learner endpoint took: the accounting users compare with the learner's."""
    try:
        stream.flush(flush_s)
    except _core.TransportTimeout:
        log.warning("learner stream: groups still unacknowledged after %.0fs at exit", flush_s)
    for i, stats in enumerate(stream.stats()):
        log.info("learner stream %d at exit: %s", i, stats)
    stream.close()


class WeightReceiver:
    """The weight subscriber task of one service: applies updates to the engine until stopped."""

    def __init__(self, subscriber: Any, task: asyncio.Task[None], stop_event: asyncio.Event):
        self.subscriber = subscriber
        self.task = task
        self._stop = stop_event

    @classmethod
    def start(
        cls, endpoint: str | None, engine: Engine, *, hold: asyncio.Lock
    ) -> WeightReceiver | None:
        """Connect to the learner's publisher at `endpoint` (None: no receiver); each update
        takes `hold` first (a held-out evaluation holds it with `hold_weights`)."""
        if endpoint is None:
            return None
        update = getattr(engine, "update_weights", None)
        if update is None:
            raise TypeError(
                f"weights_endpoint is set but {type(engine).__name__} has no update_weights"
            )
        from agentgym_rl.weights.subscriber import WeightSubscriber

        subscriber = WeightSubscriber(endpoint, last_version=int(engine.version))

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
        while True:
            try:
                await asyncio.wait_for(sub.current.wait(), timeout=report_every_s)
                break
            except TimeoutError:
                if self.task.done():
                    raise RuntimeError("weights: the subscriber stopped while waiting") from None
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


async def _finish_evaluation(task: asyncio.Task[None], held_out: HeldOutEval | None) -> None:
    """After the dispatcher stopped: let a final evaluation finish, cancel a periodic one."""
    if held_out is not None and held_out.final_started:
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return
    task.cancel()
    results = await asyncio.gather(task, return_exceptions=True)
    if results and isinstance(results[0], Exception):
        log.error("held-out evaluation failed: %r", results[0])


def save_cursor(log_dir: Path, cursor: Cursor) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / CURSOR_FILE).write_text(json.dumps({"epoch": cursor.epoch, "index": cursor.index}))


async def serve(config: RolloutConfig, *, sync: bool = False) -> DispatchSummary:
    """Start vLLM on `config.model`, then `run_service`; the engine is shut down at the end."""
    from agentgym_rl.rollout.engine import EngineOptions, VllmEngine

    e = config.engine
    options = EngineOptions(
        max_model_len=e.max_model_len,
        temperature=e.temperature,
        top_p=e.top_p,
        seed=e.seed,
        gpu_memory_utilization=e.gpu_memory_utilization,
        dtype=e.dtype,
    )
    engine = await VllmEngine.start(config.model, options)
    try:
        return await run_service(config, engine, sync=sync)
    finally:
        engine.shutdown()
