"""The continuous loop against real env servers and a real `GroupReceiver`: complete groups,
turn caps by dispatch version, backpressure without loss, env failures, stop/SIGTERM, --sync,
the episode log."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop
from harness import (
    FAST_SENDER,
    EnvServerProcess,
    ScriptedEngine,
    babyai_policy,
    check_sample_arrays,
    receive_groups,
)

from agentgym_rl import _core
from agentgym_rl.config import load_rollout_config
from agentgym_rl.episode.agent import AgentLoop
from agentgym_rl.episode.dataset import Task, TaskSource
from agentgym_rl.episode.log import EpisodeLog, read_episodes
from agentgym_rl.episode.types import EnvSpec
from agentgym_rl.report.groups import account
from agentgym_rl.report.records import read_jsonl
from agentgym_rl.rollout.dispatcher import Dispatcher, DispatchSummary
from agentgym_rl.rollout.schedule import TurnSchedule
from agentgym_rl.rollout.service import run_service
from agentgym_rl.rollout.sink import LearnerStream
from agentgym_rl.rollout.sync_loop import SyncLoop
from agentgym_rl.wire.ledger import GroupLedger
from waiting import await_until

NOOP = lambda prompt, rid: "Thought: wait.\nAction: noop"  # noqa: E731


def build(
    addresses: list[str],
    engine: ScriptedEngine,
    chat: Any,
    endpoint: str,
    *,
    env: str = "noop",
    group_size: int = 2,
    buffer: dict[str, int] | None = None,
    schedule: TurnSchedule | None = None,
    max_groups: int = 4,
    **kw: Any,
) -> tuple[Dispatcher, _core.EnvPool, LearnerStream]:
    pool = _core.EnvPool(
        [_core.EnvServer(env, a) for a in addresses], health_interval_s=0.1, step_timeout_s=3.0
    )
    agent = AgentLoop(
        engine, pool, chat, envs={env: EnvSpec()}, max_model_len=4096, max_tokens_per_turn=64
    )
    b = dict(groups_per_step=2, max_staleness=100, max_in_flight=4, max_ready=8)
    b.update(buffer or {})
    buf = _core.TrajectoryBuffer(group_size=group_size, **b)
    source = TaskSource([Task(f"{env}_{i}", env, i) for i in range(50)], seed=0)
    stream = LearnerStream([endpoint], sender_id="test", timeout_s=0.2, **FAST_SENDER)
    dispatcher = Dispatcher(
        agent,
        buf,
        source,
        schedule or TurnSchedule.fixed(3),
        stream,
        version_source=lambda: engine.version,
        max_groups=max_groups,
        **kw,
    )
    return dispatcher, pool, stream


async def finish(
    task: asyncio.Task[DispatchSummary], pool: _core.EnvPool, stream: LearnerStream
) -> DispatchSummary:
    try:
        return await asyncio.wait_for(task, 30)
    finally:
        await pool.shutdown()
        stream.close()


async def until(pred: Callable[[], bool], deadline_s: float = 20.0) -> None:
    async def holds() -> bool:
        return pred()

    await await_until(holds, deadline_s, "the condition", poll_s=0.02)


def test_groups_complete_and_turn_caps_follow_dispatch_version(
    noop_server, chat, free_port
) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    schedule = TurnSchedule([2, 3, 4], versions_per_stage=2)
    engine = ScriptedEngine(chat, NOOP, bump_every=6)

    async def main() -> tuple[DispatchSummary, list[_core.Group]]:
        with _core.GroupReceiver(endpoint) as receiver:
            d, pool, stream = build(
                [noop_server.zmq],
                engine,
                chat,
                endpoint,
                group_size=3,
                schedule=schedule,
                max_groups=10,
            )
            task = asyncio.create_task(d.run())
            groups = await asyncio.to_thread(receive_groups, receiver, 10)
            return await finish(task, pool, stream), groups

    summary, groups = asyncio.run(main())
    assert summary.unsent_groups == 0 and summary.aborted_episodes == 0
    assert summary.buffer["released"] == summary.buffer["admitted"] == 10
    assert len({g.group_id for g in groups}) == 10
    stages = set()
    for g in groups:
        assert len(g) == 3 and g.env == "noop" and g.task_id.startswith("noop_")
        assert len({s.dispatch_version for s in g.samples}) == 1
        for s in g.samples:
            check_sample_arrays(s)
            budget = schedule.budget(s.dispatch_version)
            assert (s.stage, s.turn_cap) == (budget.stage, budget.turn_cap)
            assert (s.status, s.turns) == ("turn_cap", budget.turn_cap)  # noop never ends
            assert s.versions[s.loss_mask == 1].min() >= s.dispatch_version
            stages.add(s.stage)
    assert len(stages) >= 2, "the engine's version moved, so later groups run in later stages"


def test_unreachable_learner_backpressure_then_resume(noop_server, chat, free_port) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    engine = ScriptedEngine(chat, NOOP)

    async def main() -> tuple[DispatchSummary, list[_core.Group], int]:
        d, pool, stream = build(
            [noop_server.zmq],
            engine,
            chat,
            endpoint,
            buffer=dict(groups_per_step=1, max_in_flight=2, max_ready=2),
            max_groups=6,
        )
        task = asyncio.create_task(d.run())
        await until(lambda: d.buffer.counters()["ready"] == 2 and d.metrics.send_timeouts >= 2)
        paused_at = d.admitted
        await asyncio.sleep(0.5)  # long enough for several admission rounds; none may start
        assert d.admitted == paused_at < 6 and d.buffer.capacity() == 0
        assert d.buffer.counters()["running"] == 0
        with _core.GroupReceiver(endpoint) as receiver:
            groups = await asyncio.to_thread(receive_groups, receiver, 6)
            summary = await finish(task, pool, stream)
        return summary, groups, paused_at

    summary, groups, paused_at = asyncio.run(main())
    assert paused_at <= 3  # max_ready queued plus at most one held by the send being retried
    assert sorted(g.group_id for g in groups) == sorted({g.group_id for g in groups})
    assert len(groups) == 6 and summary.unsent_groups == 0
    assert summary.buffer["released"] == 6 and summary.buffer["aborted"] == 0
    assert all(len(g) == 2 for g in groups)


def test_killed_env_server_flags_its_episodes_others_continue(
    spawn_server, chat, free_port
) -> None:
    a, b = spawn_server("noop"), spawn_server("noop")
    endpoint = f"tcp://127.0.0.1:{free_port}"
    engine = ScriptedEngine(chat, NOOP, delay_s=0.02)

    async def main() -> tuple[DispatchSummary, list[_core.Group]]:
        # the kill lands while the first wave's episodes, placed on both servers, wait on the
        # engine: no timing decides whether any episode was still on `a` when it died
        engine.gate = asyncio.Event()
        with _core.GroupReceiver(endpoint) as receiver:
            d, pool, stream = build(
                [a.http, b.http],
                engine,
                chat,
                endpoint,
                schedule=TurnSchedule.fixed(8),
                max_groups=12,
            )
            task = asyncio.create_task(d.run())
            await until(lambda: engine.in_flight == 8)  # 4 groups x 2 episodes, envs created
            a.kill()
            engine.gate.set()
            groups = await asyncio.to_thread(receive_groups, receiver, 12)
            return await finish(task, pool, stream), groups

    summary, groups = asyncio.run(main())
    statuses = [s.status for g in groups for s in g.samples]
    assert statuses.count("env_failure") >= 1
    assert set(statuses) <= {"env_failure", "turn_cap"}
    # groups admitted once the pool saw the server down run on the survivor only
    latest = sorted(groups, key=lambda g: g.group_id)[-3:]
    assert all(s.status == "turn_cap" for g in latest for s in g.samples)
    assert summary.unsent_groups == 0 and len(groups) == 12


def test_stop_finishes_in_flight_episodes_and_flushes(noop_server, chat, free_port) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    engine = ScriptedEngine(chat, NOOP)

    async def main() -> tuple[DispatchSummary, list[_core.Group], int]:
        engine.gate = asyncio.Event()
        with _core.GroupReceiver(endpoint) as receiver:
            d, pool, stream = build([noop_server.zmq], engine, chat, endpoint, max_groups=50)
            task = asyncio.create_task(d.run())
            await until(lambda: engine.in_flight == 8)  # 4 groups x 2 episodes, all waiting
            d.stop()
            engine.gate.set()
            groups = await asyncio.to_thread(receive_groups, receiver, 4)
            return await finish(task, pool, stream), groups, d.admitted

    summary, groups, admitted = asyncio.run(main())
    assert admitted == 4 and summary.aborted_episodes == 0 and len(groups) == 4


def test_stop_aborts_hung_episodes_and_counts_them(noop_server, chat, free_port) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    engine = ScriptedEngine(chat, NOOP)

    async def main() -> DispatchSummary:
        engine.gate = asyncio.Event()  # never set: every generate hangs
        d, pool, stream = build(
            [noop_server.zmq], engine, chat, endpoint, drain_timeout_s=0.2, flush_timeout_s=0.5
        )
        task = asyncio.create_task(d.run())
        await until(lambda: engine.in_flight == 8)
        d.stop()
        summary = await finish(task, pool, stream)
        assert noop_server_live(noop_server) == 0  # aborted episodes closed their env episodes
        return summary

    summary = asyncio.run(main())
    assert summary.aborted_episodes == 8 and summary.buffer["aborted"] == 4
    assert summary.buffer["running"] == 0 and summary.groups_sent == 0


def test_stop_waits_for_no_learner_that_is_gone(noop_server, chat, free_port) -> None:
    """A finished run's learner exits before its rollout servers stop: the groups ready by then
    are counted unsent at once, not sent into the void until `flush_timeout_s` (every train
    run's end once took those 10 s)."""
    endpoint = f"tcp://127.0.0.1:{free_port}"
    engine = ScriptedEngine(chat, NOOP)

    async def main() -> tuple[DispatchSummary, float]:
        with _core.GroupReceiver(endpoint, window=1) as receiver:
            d, pool, stream = build(
                [noop_server.zmq], engine, chat, endpoint, max_groups=50, flush_timeout_s=60.0
            )
            task = asyncio.create_task(d.run())
            await asyncio.to_thread(receive_groups, receiver, 1)
        await until(lambda: d.buffer.counters()["ready"] > 0 and not stream.linked())
        started = time.monotonic()
        d.stop()
        return await finish(task, pool, stream), time.monotonic() - started

    summary, took_s = asyncio.run(main())
    assert summary.unsent_groups > 0 and took_s < 20.0, (summary, took_s)


def test_engine_error_aborts_only_its_group(noop_server, chat, free_port, tmp_path) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    ledger = GroupLedger(tmp_path / "rollout-0")

    def policy(prompt: str, rid: str) -> str:
        if rid.startswith("g1-e0-"):
            raise RuntimeError("engine exploded")
        return NOOP(prompt, rid)

    engine = ScriptedEngine(chat, policy, delay_s=0.005)

    async def main() -> tuple[DispatchSummary, list[_core.Group]]:
        with _core.GroupReceiver(endpoint) as receiver:
            d, pool, stream = build(
                [noop_server.zmq], engine, chat, endpoint, max_groups=4, ledger=ledger
            )
            task = asyncio.create_task(d.run())
            groups = await asyncio.to_thread(receive_groups, receiver, 3)
            return await finish(task, pool, stream), groups

    summary, groups = asyncio.run(main())
    assert sorted(g.group_id for g in groups) == [0, 2, 3]
    assert summary.buffer["aborted"] == 1 and summary.aborted_episodes == 2
    ledger.close()
    records = read_jsonl(tmp_path / "rollout-0" / "groups.jsonl")
    dispatched = [r for r in records if "dispatched" in r]
    assert len(dispatched) == 4 and {r["episodes"] for r in dispatched} == {2}
    aborted = [r["aborted"] for r in records if "aborted" in r]
    assert aborted == [key for r in dispatched if (key := r["dispatched"]).endswith("#1")]
    acc = account(tmp_path)  # every dispatched group made or aborted, none in flight at exit
    assert (acc.dispatched, acc.made, acc.aborted, acc.in_flight_killed) == (4, 3, 1, 0)


def noop_server_live(server: EnvServerProcess) -> int:
    import json
    import urllib.request

    with urllib.request.urlopen(f"{server.http}/health", timeout=2) as r:
        return int(json.loads(r.read())["live_episodes"])


def service_config(server: EnvServerProcess, endpoint: str, log_dir: Path, *extra: str) -> Any:
    return load_rollout_config(
        Path(__file__).resolve().parents[2] / "configs" / "rollout" / "babyai_tiny.yaml",
        [
            f"envs.0.addresses=['{server.zmq}']",
            f"learner.endpoints=['{endpoint}']",
            f"log_dir={log_dir}",
            "dataset.split="
            + str(
                Path(__file__).resolve().parents[2] / "envs/agentgym_envs/babyai/data/train.json"
            ),
            "dataset.group_size=2",
            "scaling_inter.turn_caps=[3]",
            "status_interval_s=0.1",
            *extra,
        ],
    )


def test_service_streams_babyai_and_stops_on_sigterm(
    babyai_server, chat, free_port, tmp_path
) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    config = service_config(babyai_server, endpoint, tmp_path)
    engine = ScriptedEngine(chat, babyai_policy, delay_s=0.01)

    async def main() -> tuple[DispatchSummary, list[_core.Group]]:
        with _core.GroupReceiver(endpoint) as receiver:
            task = asyncio.create_task(run_service(config, engine, chat=chat, quiet=True))
            groups = await asyncio.to_thread(receive_groups, receiver, 3)
            os.kill(os.getpid(), signal.SIGTERM)
            while not task.done() or (got := receiver.recv(timeout_s=0.05)) is not None:
                got = await asyncio.to_thread(receiver.recv, 0.05)
                if got is not None:
                    groups.append(_core.decode_group(got[1]))
            return await task, groups

    summary, groups = uvloop.run(main())  # the production event loop
    assert len(groups) == summary.groups_sent >= 3 and summary.unsent_groups == 0
    for g in groups:
        assert g.env == "babyai" and len(g) == 2
        for s in g.samples:
            check_sample_arrays(s)
            assert s.turn_cap == 3 and s.turns <= 3
    c = summary.buffer
    assert c["admitted"] == c["released"] + c["aborted"] + c["filtered"] + c["stale"]
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") >= 1
    assert (tmp_path / "cursor.json").exists()


def test_sync_loop_batches_turns_and_streams(babyai_server, chat, free_port) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    engine = ScriptedEngine(chat, babyai_policy, delay_s=0.01)

    async def main() -> tuple[DispatchSummary, list[_core.Group]]:
        with _core.GroupReceiver(endpoint) as receiver:
            stream = LearnerStream([endpoint], sender_id="sync", timeout_s=0.5, **FAST_SENDER)
            loop = SyncLoop(
                engine,
                chat,
                stream,
                TaskSource([Task(f"babyai_{i}", "babyai", i) for i in range(10)], seed=0),
                TurnSchedule.fixed(3),
                _core.TrajectoryBuffer(
                    group_size=2, groups_per_step=2, max_staleness=0, max_in_flight=2, max_ready=2
                ),
                addresses={"babyai": [babyai_server.http]},
                envs={"babyai": EnvSpec()},
                max_model_len=4096,
                max_tokens_per_turn=64,
                version_source=lambda: engine.version,
            )
            run = asyncio.create_task(loop.run(max_batches=1))
            groups = await asyncio.to_thread(receive_groups, receiver, 2)
            summary = await asyncio.wait_for(run, 30)
            stream.close()
            return summary, groups

    summary, groups = asyncio.run(main())
    assert summary.groups_sent == 2 and engine.max_in_flight == 4  # one batched call per turn
    for g in groups:
        assert len(g) == 2
        for s in g.samples:
            check_sample_arrays(s)
            assert s.status in {"done", "turn_cap"} and s.turns <= 3


def test_dispatcher_logs_every_finished_episode(noop_server, chat, free_port, tmp_path) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    log = EpisodeLog(tmp_path / "episodes.jsonl", tokenizer="chatml")

    async def main() -> list[_core.Group]:
        with _core.GroupReceiver(endpoint) as receiver:
            d, pool, stream = build(
                [noop_server.zmq], ScriptedEngine(chat, NOOP), chat, endpoint, episode_log=log
            )
            task = asyncio.create_task(d.run())
            groups = await asyncio.to_thread(receive_groups, receiver, 4)
            await finish(task, pool, stream)
            return groups

    groups = asyncio.run(main())
    recs = list(read_episodes(log.path))
    assert len(recs) == 8  # 4 groups of 2
    sent = {(g.group_id, tuple(s.input_ids.tolist())) for g in groups for s in g.samples}
    assert {(r.group_id, tuple(r.input_ids)) for r in recs} == sent
    for r in recs:
        assert r.env == "noop" and r.item_id.startswith("noop_") and r.status == "turn_cap"
        assert r.request_id.startswith(f"g{r.group_id}-e")


def test_a_flush_does_not_wait_for_a_learner_that_is_gone(free_port) -> None:
    """A finished run's learner exits holding groups it never took: the rollout server's flush at
    exit gives up once the link is lost, not at its deadline; while the learner is up, it waits."""
    endpoint = f"tcp://127.0.0.1:{free_port}"
    stream = LearnerStream([endpoint], sender_id="test", timeout_s=5.0, **FAST_SENDER)
    try:
        with _core.GroupReceiver(endpoint):
            stream.send(b"group")  # never received: never acknowledged
            start = time.monotonic()
            with pytest.raises(_core.TransportTimeout):
                stream.flush(0.5)
            assert time.monotonic() - start >= 0.5  # the learner is up: the whole wait
        start = time.monotonic()
        with pytest.raises(_core.TransportTimeout, match="1 sent groups not acknowledged"):
            stream.flush(60.0)
        assert time.monotonic() - start < 30.0  # the link is lost within its peer timeout
    finally:
        stream.close()
