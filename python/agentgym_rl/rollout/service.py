"""Assembles one rollout service from a `RolloutConfig` and runs it until done or signalled.

Contract: `run_service(config, engine, sync=...)` builds the chat tokenizer, task source, turn
schedule, metrics, status sink, learner stream, env pool and group ledger (`<log_dir>/
groups.jsonl`); starts the weight receiver (`weights/receiver.py`) when `config.weights_endpoint`
is set and waits until this server holds the learner's version, so nothing is generated with
outdated weights; then builds either the asynchronous `Dispatcher` (trajectory buffer, training
agent) or the reference `SyncLoop` (its own HTTP clients; on-policy with a learner: each step's
batches wait for the weights trained on the previous one), runs it with SIGTERM/SIGINT winding
it down cleanly, and at the end stops the receiver (an update being applied finishes first),
shuts the pool down, closes the stream (logging what each learner endpoint took), the ledger
(a clean exit only if the loop ran to its end: a crash loses what it held, as a kill does) and
the status sink, writes the dataset cursor to `<log_dir>/cursor.json` (a curriculum's state to
`curriculum.json`) and returns the summary. Each step is one named function below. Any object satisfying `Engine` works (tests use
a scripted one); `serve()` starts vLLM first.

With `config.eval`, in either loop, a `HeldOutEval` task evaluates held-out tasks on the same
engine through the env pool (`rollout/held_out.py`, records in `<log_dir>/eval.jsonl`);
reaching `eval.final_version` stops the loop, and the service returns once that final evaluation
is written. Finished training episodes are logged to `<log_dir>/episodes.jsonl` every
`episode_log_every` (for `show`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from agentgym_rl import _core
from agentgym_rl.auth import read_secret
from agentgym_rl.config import ActionFormat, RolloutConfig
from agentgym_rl.episode.agent import AgentLoop
from agentgym_rl.episode.dataset import Cursor, MixCursor, TaskMix, TaskSource, load_split
from agentgym_rl.episode.log import EpisodeLog
from agentgym_rl.episode.metrics import RolloutMetrics
from agentgym_rl.episode.tools import ToolFamily, detect_family, tool_reader
from agentgym_rl.episode.types import Engine, EnvSpec
from agentgym_rl.gateway.app import Gateway
from agentgym_rl.gateway.runner import UserAgents, load_agent
from agentgym_rl.gateway.serve import GatewayServer, bearer_token
from agentgym_rl.judging.groups import GroupJudge
from agentgym_rl.judging.serving import judges_for
from agentgym_rl.processes.orphans import die_if_orphaned
from agentgym_rl.rollout.curriculum import STATE_FILE as CURRICULUM_FILE
from agentgym_rl.rollout.curriculum import Curriculum, saved_state
from agentgym_rl.rollout.dispatcher import Dispatcher, DispatchSummary, Player
from agentgym_rl.rollout.held_out import EvalPlayer, HeldOutEval
from agentgym_rl.rollout.in_flight import InFlightSizer
from agentgym_rl.rollout.schedule import TurnSchedule
from agentgym_rl.rollout.sink import LearnerStream
from agentgym_rl.rollout.status import StatusSink
from agentgym_rl.rollout.sync_loop import SyncLoop
from agentgym_rl.trajectory import ChatTokenizer
from agentgym_rl.weights.receiver import WeightReceiver
from agentgym_rl.wire.ledger import GroupLedger

log = logging.getLogger(__name__)
CURSOR_FILE = "cursor.json"


async def run_service(
    config: RolloutConfig,
    engine: Engine,
    *,
    sync: bool = False,
    chat: ChatTokenizer | None = None,
    quiet: bool = False,
    max_groups: int | None = None,
    judges: Mapping[str, GroupJudge] | None = None,
) -> DispatchSummary:
    """Run the rollout loop on `engine` until the dataset ends, `max_groups`, or a signal.

    With `sync`, `max_groups` is rounded up to whole batches of `buffer.groups_per_step`.
    `judges`: the judged envs' judges (`judging/serving.py`; the asynchronous loop only).
    """
    if sync and judges:
        raise ValueError("judge rewards (envs[].reward) need the asynchronous loop, not --sync")
    chat = chat or ChatTokenizer.from_dir(config.tokenizer or config.model)
    source = task_source(config)
    schedule = TurnSchedule.for_rollout(config)
    metrics = RolloutMetrics()
    status = StatusSink(config.log_dir, quiet=quiet)
    secret = read_secret(config.auth.secret_file)
    stream = learner_stream(config, secret)
    # weight updates wait while this is held; the evaluation holds it only with `hold_weights`
    weights_hold = asyncio.Lock()
    receiver = WeightReceiver.start(
        config.weights_endpoint,
        engine,
        hold=weights_hold,
        relay_host=config.weights_relay_host,
        secret=secret,
    )
    if receiver is not None:
        await receiver.until_current()  # the gate: nothing below generates before this
    runner: Dispatcher | SyncLoop
    pool, ledger = env_pool(config), GroupLedger(config.log_dir)
    endpoint = await open_gateway(config, engine, chat, secret)
    if sync:
        # with a learner, each step's batches wait for the weights trained on the last step's
        parts = (config, engine, chat, stream, source, schedule, metrics, status, ledger)
        runner = sync_loop(*parts, on_policy=receiver is not None)
    else:
        agent: Player = (
            agent_loop(config, engine, pool, chat, metrics)
            if endpoint is None
            else user_agents(config, endpoint, metrics)
        )
        runner = dispatcher(
            config, agent, source, schedule, stream, status, ledger, max_groups, judges=judges
        )
    held_out = held_out_eval(config, engine, pool, chat, schedule, runner, weights_hold, endpoint)
    evaluating = None if held_out is None else asyncio.create_task(held_out.run())
    ended = False  # the loop ran to its end: the ledger records a clean exit, else a crash
    try:
        with stopped_by_signals(runner, evaluating):
            summary = await run_to_end(runner, config.buffer.groups_per_step, max_groups)
            ended = True
            if evaluating is not None:
                await _finish_evaluation(evaluating, held_out)
    finally:
        await _cancel(evaluating)
        if receiver is not None:
            await receiver.stop()
        await pool.shutdown()
        if endpoint is not None:
            await endpoint.close()
        _close_stream(stream)
        ledger.close(clean=ended)
        status.close()
        save_cursor(config.log_dir, runner.tasks.cursor)  # before a task no group took
        if isinstance(source, Curriculum):
            (config.log_dir / CURRICULUM_FILE).write_text(json.dumps(saved_state(source)))
    log.info("rollouts finished: %s", summary)
    return summary


def task_source(config: RolloutConfig) -> TaskSource | TaskMix | Curriculum:
    """The dataset (one source, or a mix of several, drawn through a curriculum when
    `dataset.curriculum`), resumed from `<log_dir>/cursor.json` (and `curriculum.json`) when
    `dataset.resume` and they exist."""
    ds = config.dataset
    tasks = _tasks(config)
    if ds.curriculum is None:
        return tasks
    path = config.log_dir / CURRICULUM_FILE
    state = json.loads(path.read_text()) if ds.resume and path.exists() else None
    return Curriculum(tasks, ds.curriculum, seed=ds.shuffle_seed, state=state)


def _tasks(config: RolloutConfig) -> TaskSource | TaskMix:
    ds = config.dataset
    path = config.log_dir / CURSOR_FILE
    saved = json.loads(path.read_text()) if ds.resume and path.exists() else {}
    # a one-source cursor is {"epoch", "index"}; a mix's {"draws", "sources": [those]}
    found = saved.get("sources", [saved]) if saved else []
    cursors = [Cursor(int(c["epoch"]), int(c["index"])) for c in found]
    sources = [
        TaskSource(
            load_split(source.split, source.env),
            seed=ds.shuffle_seed,
            cursor=cursors[i] if i < len(cursors) else Cursor(),
            epochs=ds.epochs,
        )
        for i, source in enumerate(ds.mix)
    ]
    if len(sources) == 1:
        return sources[0]
    weights = [source.weight for source in ds.mix]
    return TaskMix(sources, weights, seed=ds.shuffle_seed, draws=int(saved.get("draws", 0)))


def save_cursor(log_dir: Path, cursor: Cursor | MixCursor) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(cursor, MixCursor):
        sources = [{"epoch": c.epoch, "index": c.index} for c in cursor.sources]
        record: dict[str, object] = {"draws": cursor.draws, "sources": sources}
    else:
        record = {"epoch": cursor.epoch, "index": cursor.index}
    (log_dir / CURSOR_FILE).write_text(json.dumps(record))


def learner_stream(config: RolloutConfig, secret: bytes | None = None) -> LearnerStream:
    learner = config.learner
    return LearnerStream(
        learner.endpoints,
        sender_id=learner.sender_id,
        timeout_s=learner.send_timeout_s,
        secret=secret,
    )


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


def env_specs(
    config: RolloutConfig, chat: ChatTokenizer, *, penalties: bool = True
) -> dict[str, EnvSpec]:
    """How the agent talks to each env; without `penalties`, rewards are the env's scores (no
    invalid penalty, no floor, no turn cost)."""
    return {
        e.env: EnvSpec(
            e.action_format,
            e.system_prompt,
            e.invalid_penalty if penalties else 0.0,
            e.reward_floor if penalties else None,
            e.turn_cost if penalties else 0.0,
            tool_reader(e.env, chat, e.tool_parser, e.tool_calls_per_turn)
            if e.action_format is ActionFormat.TOOLS
            else None,
            e.context.window,
            e.shaping_on,
            e.reward,
        )
        for e in config.envs
    }


def context_length(config: RolloutConfig, engine: Engine) -> int:
    """The context the episodes budget: the config's, else the engine's (`serve()` resolves
    the model's own length into the config; a scripted engine may carry its own)."""
    length = config.engine.max_model_len or getattr(engine, "max_model_len", None)
    if length is None:
        raise ValueError("engine.max_model_len is unset and the engine does not say its own")
    return int(length)


def agent_loop(
    config: RolloutConfig,
    engine: Engine,
    pool: _core.EnvPool,
    chat: ChatTokenizer,
    metrics: RolloutMetrics,
    *,
    held_out: bool = False,
) -> AgentLoop:
    """The training agent; with `held_out`, the held-out evaluation's: its own `metrics`
    (evaluation episodes never count as training episodes), the env's scores as rewards (the
    penalty shapes training only), no drift check, and the evaluation's temperature."""
    temperature = config.eval.temperature if held_out and config.eval is not None else None
    return AgentLoop(
        engine,
        pool,
        chat,
        envs=env_specs(config, chat, penalties=not held_out),
        max_model_len=context_length(config, engine),
        max_tokens_per_turn=config.engine.max_tokens_per_turn,
        stop_ids=getattr(engine, "stop_token_ids", None),
        check_drift=config.check_drift and not held_out,
        metrics=metrics,
        sampling={} if temperature is None else {"temperature": temperature},
    )


async def open_gateway(
    config: RolloutConfig, engine: Engine, chat: ChatTokenizer, secret: bytes | None
) -> GatewayServer | None:
    """With `config.agent`: the OpenAI-compatible endpoint the user's agent talks to, serving
    this engine (its URL and bearer token also written to `<log_dir>/gateway.json`)."""
    a = config.agent
    if a is None:
        return None
    try:
        family = detect_family(chat) if a.tool_parser == "auto" else ToolFamily(a.tool_parser)
    except ValueError:
        family = None  # a template without tools: replies are text
    gateway = Gateway(
        engine,
        chat,
        model=a.model_name,
        max_model_len=context_length(config, engine),
        max_tokens_per_turn=config.engine.max_tokens_per_turn,
        stop_ids=getattr(engine, "stop_token_ids", None),
        family=family,
        token=bearer_token(secret),
    )
    server = await GatewayServer.start(gateway, a.host, a.port)
    Path(config.log_dir).mkdir(parents=True, exist_ok=True)
    info = {"url": server.url, "token": gateway.token}
    (Path(config.log_dir) / "gateway.json").write_text(json.dumps(info) + "\n")
    log.info("agent endpoint at %s", server.url)
    return server


def user_agents(
    config: RolloutConfig,
    endpoint: GatewayServer,
    metrics: RolloutMetrics,
    *,
    held_out: bool = False,
) -> UserAgents:
    """The user's agent as the episode player (held out: the evaluation's temperature)."""
    a = config.agent
    assert a is not None
    temperature = config.eval.temperature if held_out and config.eval is not None else None
    assert endpoint.gateway.token is not None
    return UserAgents(
        endpoint.gateway,
        endpoint.url,
        endpoint.gateway.token,
        agent=load_agent(a.function) if a.function else None,
        command=a.command,
        env_urls=a.env_urls
        or {e.env: [x for x in e.addresses if x.startswith("http://")] for e in config.envs},
        timeout_s=a.timeout_s,
        metrics=metrics,
        sampling={} if temperature is None else {"temperature": temperature},
        held_out=held_out,
    )


def trajectory_buffer(config: RolloutConfig, start_version: int) -> _core.TrajectoryBuffer:
    b = config.buffer
    return _core.TrajectoryBuffer(
        group_size=config.dataset.group_size,
        groups_per_step=b.groups_per_step,
        max_staleness=b.max_staleness,
        max_in_flight=b.max_in_flight,
        max_ready=b.max_ready,
        filter_zero_variance=b.filter_zero_variance,
        start_version=start_version,
        # ids unique across restarts of this server (its groups are told apart in the logs)
        first_group_id=time.time_ns() // 1_000_000 << 20,
    )


def episode_log(config: RolloutConfig) -> EpisodeLog | None:
    tokenizer_dir = Path(config.tokenizer or config.model)
    return EpisodeLog.in_dir(
        config.log_dir,
        config.episode_log_every,
        # absolute, so that `show` finds it from any working directory
        tokenizer=str(tokenizer_dir.resolve()) if tokenizer_dir.exists() else None,
    )


def dispatcher(
    config: RolloutConfig,
    agent: Player,
    source: TaskSource | TaskMix | Curriculum,
    schedule: TurnSchedule,
    stream: LearnerStream,
    status: StatusSink,
    ledger: GroupLedger,
    max_groups: int | None,
    *,
    judges: Mapping[str, GroupJudge] | None = None,
) -> Dispatcher:
    """The asynchronous loop; its buffer starts at the engine's version (read after the gate)."""
    engine = agent.engine
    return Dispatcher(
        agent,
        trajectory_buffer(config, int(engine.version)),
        source,
        schedule,
        stream,
        version_source=lambda: engine.version,
        status=status,
        status_interval_s=config.status_interval_s,
        max_groups=max_groups,
        ledger=ledger,
        episode_log=episode_log(config),
        sizer=in_flight_sizer(config, engine),
        judges=judges,
    )


def in_flight_sizer(config: RolloutConfig, engine: Engine) -> InFlightSizer | None:
    """With `buffer.in_flight: auto`: enough groups to fill the engine's batch (its
    `max_num_seqs`; 128, vLLM's, for an engine that names none, or fewer where its KV cache
    holds fewer requests), at least one learner step's."""
    b = config.buffer
    if b.in_flight != "auto":
        return None
    options = getattr(engine, "options", None)
    return InFlightSizer(
        group_size=config.dataset.group_size,
        floor=min(b.groups_per_step, b.max_in_flight),
        ceiling=b.max_in_flight,
        target=int(getattr(options, "max_num_seqs", 128)),
        kv_tokens=getattr(engine, "kv_cache_tokens", None),
    )


def sync_loop(
    config: RolloutConfig,
    engine: Engine,
    chat: ChatTokenizer,
    stream: LearnerStream,
    source: TaskSource | TaskMix | Curriculum,
    schedule: TurnSchedule,
    metrics: RolloutMetrics,
    status: StatusSink,
    ledger: GroupLedger,
    *,
    on_policy: bool,
) -> SyncLoop:
    """The reference's loop on the same buffer settings (filter, group ids) as the async one."""
    return SyncLoop(
        engine,
        chat,
        stream,
        source,
        schedule,
        trajectory_buffer(config, int(engine.version)),
        addresses={e.env: e.addresses for e in config.envs},
        envs=env_specs(config, chat),
        dialects={e.env: e.dialect for e in config.envs},
        max_model_len=context_length(config, engine),
        max_tokens_per_turn=config.engine.max_tokens_per_turn,
        version_source=lambda: engine.version,
        on_policy=on_policy,
        final_version=None if config.eval is None else config.eval.final_version,
        metrics=metrics,
        status=status,
        ledger=ledger,
        episode_log=episode_log(config),
        check_drift=config.check_drift,
    )


def held_out_eval(
    config: RolloutConfig,
    engine: Engine,
    pool: _core.EnvPool,
    chat: ChatTokenizer,
    schedule: TurnSchedule,
    runner: Dispatcher | SyncLoop,
    weights_hold: asyncio.Lock,
    endpoint: GatewayServer | None = None,
) -> HeldOutEval | None:
    """With `config.eval`: the evaluation, whose final one stops `runner` first (played by the
    user's agent when the episodes are)."""
    if config.eval is None:
        return None
    splits = config.eval_splits()
    caps = {env: config.eval.turn_cap or schedule.for_env(env).max_turn_cap for env in splits}
    player: EvalPlayer = (
        agent_loop(config, engine, pool, chat, RolloutMetrics(), held_out=True)
        if endpoint is None
        else user_agents(config, endpoint, RolloutMetrics(), held_out=True)
    )
    return HeldOutEval(
        config.eval,
        player,
        splits=splits,
        turn_caps=caps,
        log_dir=config.log_dir,
        env_options={e.env: e.env_options for e in config.envs},
        on_final=runner.stop,
        hold=weights_hold if config.eval.hold_weights else asyncio.Lock(),
        episode_log=runner.episode_log,  # one writer of the file: lines never interleave
    )


@contextlib.contextmanager
def stopped_by_signals(
    runner: Dispatcher | SyncLoop, evaluating: asyncio.Task[None] | None
) -> Iterator[None]:
    """While inside, SIGTERM and SIGINT stop `runner` (it winds down cleanly) and cancel
    `evaluating`; with the supervisor dead, the process ends at once (`die_if_orphaned`)."""

    def on_signal() -> None:
        die_if_orphaned()
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
        yield
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


async def run_to_end(
    runner: Dispatcher | SyncLoop, groups_per_step: int, max_groups: int | None
) -> DispatchSummary:
    """Run `runner`; the sync loop runs whole batches, enough for `max_groups`."""
    if isinstance(runner, SyncLoop):
        batches = None if max_groups is None else -(-max_groups // groups_per_step)
        return await runner.run(max_batches=batches)
    return await runner.run()


async def _finish_evaluation(task: asyncio.Task[None], held_out: HeldOutEval | None) -> None:
    """After the loop stopped: let a final evaluation finish (the sync loop may stop at the
    final version before the evaluation sees it), cancel a periodic one."""
    if held_out is not None and (held_out.final_started or held_out.final_due):
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return
    task.cancel()
    results = await asyncio.gather(task, return_exceptions=True)
    if results and isinstance(results[0], Exception):
        log.error("held-out evaluation failed: %r", results[0])


async def _cancel(task: asyncio.Task[None] | None) -> None:
    if task is not None and not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _close_stream(stream: LearnerStream, flush_s: float = 2.0) -> None:
    """Give sent groups a moment to be acknowledged (close drops what is still unacknowledged),
    then log what each learner endpoint took: the accounting users compare with the learner's."""
    try:
        stream.flush(flush_s)
    except _core.TransportTimeout as e:
        log.warning("learner stream at exit: %s", e)
    for i, stats in enumerate(stream.stats()):
        log.info("learner stream %d at exit: %s", i, stats)
    stream.close()


async def serve(config: RolloutConfig, *, sync: bool = False) -> DispatchSummary:
    """Start vLLM on `config.model`, then `run_service` with `engine.max_model_len` as the
    engine runs it (None in the config: the model's own length); the engine is shut down at
    the end."""
    from agentgym_rl.inference.engine import VllmEngine
    from agentgym_rl.inference.kv_cache import sized_options

    # every episode it may hold at once: the in-flight groups' and an evaluation's
    episodes = config.buffer.max_in_flight * config.dataset.group_size
    episodes += config.eval.concurrency if config.eval is not None else 0
    if sync and any(e.reward.judge is not None for e in config.envs):
        raise ValueError("judge rewards (envs[].reward) need the asynchronous loop, not --sync")
    async with judges_for(config.envs, config.log_dir) as judges:
        engine = await VllmEngine.start(
            config.model, sized_options(config.engine, config.model, episodes)
        )
        try:
            context = config.engine.model_copy(update={"max_model_len": engine.max_model_len})
            config = config.model_copy(update={"engine": context})
            return await run_service(config, engine, sync=sync, judges=judges)
        finally:
            engine.shutdown()
