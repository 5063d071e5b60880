"""The `--sync` baseline plays the async agent's turn rule (same samples from the same turns),
fills each learner step with groups that carry signal (refilling filtered ones), and, on-policy,
generates nothing until the learner's next weights arrive."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from harness import FAST_SENDER, receive_groups

from agentgym_rl import _core
from agentgym_rl.config.rollout import http_dialect
from agentgym_rl.episode.agent import AgentLoop
from agentgym_rl.episode.dataset import Task, TaskSource
from agentgym_rl.episode.turn import EnvStepError
from agentgym_rl.episode.types import EnvSpec, EpisodePlan
from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.rollout.schedule import TurnSchedule
from agentgym_rl.rollout.sink import LearnerStream
from agentgym_rl.rollout.sync_loop import HttpEnvClient, SyncLoop
from agentgym_rl.trajectory import ChatTokenizer
from agentgym_rl.wire.ledger import GroupLedger
from scripted_engine import ScriptedEngine

# refused by the env, no action at all, then accepted turns (GoTo never ends on a turn)
SCRIPT = {0: "Action: fly to the moon", 1: "I am lost"}


def policy(prompt: str, request_id: str) -> str:
    return SCRIPT.get(int(request_id.rsplit("-t", 1)[1]), "Action: turn left")


def step_buffer(group_size: int, groups_per_step: int, **kw: Any) -> _core.TrajectoryBuffer:
    b = dict(max_staleness=100, max_in_flight=groups_per_step, max_ready=groups_per_step)
    b.update(kw)
    return _core.TrajectoryBuffer(group_size=group_size, groups_per_step=groups_per_step, **b)


def test_sync_and_async_agents_make_the_same_sample(
    babyai_server: EnvServerProcess, chat: ChatTokenizer, free_port: int
) -> None:
    task, cap, specs = Task("babyai_3", "babyai", 3), 4, {"babyai": EnvSpec(invalid_penalty=0.5)}
    schedule = TurnSchedule.fixed(cap)

    async def sync_sample() -> tuple[_core.Sample, SyncLoop]:
        stream = LearnerStream([f"tcp://127.0.0.1:{free_port}"], sender_id="sync")
        loop = SyncLoop(
            ScriptedEngine(chat, policy),
            chat,
            stream,
            TaskSource([task], shuffle=False),
            schedule,
            step_buffer(group_size=1, groups_per_step=1),
            addresses={"babyai": [babyai_server.http]},
            envs=specs,
            max_model_len=4096,
            max_tokens_per_turn=64,
            version_source=lambda: 0,
        )
        try:
            groups = await loop.batch()
        finally:
            loop.threads.shutdown()
            stream.close()
        assert groups is not None
        [[sample]] = [g.samples for g in groups]
        return sample, loop

    async def async_sample() -> tuple[_core.Sample, AgentLoop]:
        engine = ScriptedEngine(chat, policy)
        pool = _core.EnvPool([_core.EnvServer("babyai", babyai_server.zmq)], step_timeout_s=5.0)
        agent = AgentLoop(
            engine,
            pool,
            chat,
            envs=specs,
            max_model_len=4096,
            max_tokens_per_turn=64,
            stop_ids=[int(chat.eos_token_id or 0)],
        )
        try:
            return await agent.run(EpisodePlan(task, 0, schedule.budget(0), "e0")), agent
        finally:
            await pool.shutdown()

    synced, loop = asyncio.run(sync_sample())
    played, agent = asyncio.run(async_sample())
    for s in (synced, played):
        assert (s.status, s.turns, s.reward, s.turn_cap) == ("turn_cap", cap, -0.25, cap)
    assert synced.input_ids.tolist() == played.input_ids.tolist()
    assert synced.loss_mask.tolist() == played.loss_mask.tolist()
    for m in (loop.metrics, agent.metrics):
        assert (m.invalid_actions, m.env_steps, m.episodes) == (2, 3, 1)


def odd_groups_split(prompt: str, request_id: str) -> str:
    """Odd group ids: episode 0 ends at once with reward 1, episode 1 never does (signal);
    even group ids: every episode plays noop to the cap (zero variance, filtered)."""
    group, episode = request_id.split("-")[1:3]
    if int(group[1:]) % 2 and episode == "e0":
        return "Action: stop"
    return "Action: noop"


def noop_loop(
    server: EnvServerProcess,
    chat: ChatTokenizer,
    endpoint: str,
    engine: ScriptedEngine,
    *,
    filter_zero_variance: bool = False,
    **kw: Any,
) -> tuple[SyncLoop, LearnerStream]:
    stream = LearnerStream([endpoint], sender_id="sync", timeout_s=0.5, **FAST_SENDER)
    loop = SyncLoop(
        engine,
        chat,
        stream,
        TaskSource([Task(f"noop_{i}", "noop", i) for i in range(40)], seed=0),
        TurnSchedule.fixed(2),
        step_buffer(2, 2, filter_zero_variance=filter_zero_variance, max_staleness=0),
        addresses={"noop": [server.http]},
        envs={"noop": EnvSpec()},
        max_model_len=4096,
        max_tokens_per_turn=64,
        version_source=lambda: engine.version,
        **kw,
    )
    return loop, stream


def test_filtered_groups_are_refilled_at_the_same_version(
    noop_server: EnvServerProcess, chat: ChatTokenizer, free_port: int, tmp_path: Path
) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    engine = ScriptedEngine(chat, odd_groups_split)
    ledger = GroupLedger(tmp_path)

    async def main() -> tuple[Any, list[_core.Group], SyncLoop]:
        with _core.GroupReceiver(endpoint) as receiver:
            loop, stream = noop_loop(
                noop_server, chat, endpoint, engine, filter_zero_variance=True, ledger=ledger
            )
            run = asyncio.create_task(loop.run(max_batches=1))
            groups = await asyncio.to_thread(receive_groups, receiver, 2)
            summary = await asyncio.wait_for(run, 30)
            stream.close()
            return summary, groups, loop

    summary, groups, loop = asyncio.run(main())
    ledger.close()
    # batch 1 ran groups 0 and 1 (0 filtered), refills ran 2 (filtered) and then 3
    assert sorted(g.group_id for g in groups) == [1, 3]
    assert summary.groups_sent == 2 and summary.buffer["filtered"] == 2
    assert summary.buffer["steps"] == 1 and loop.metrics.episodes == 8
    for g in groups:
        assert sorted(s.reward for s in g.samples) == [0.0, 1.0]
        assert {s.dispatch_version for s in g.samples} == {0}
    events = [json.loads(line) for line in (tmp_path / "groups.jsonl").read_text().splitlines()]
    sent = {e["sent"] for e in events if "sent" in e}
    assert sent == {f"{g.task_id}#{g.group_id}" for g in groups}
    assert {e["ready"] for e in events if "ready" in e} == sent


def test_on_policy_waits_for_the_next_weights(
    noop_server: EnvServerProcess, chat: ChatTokenizer, free_port: int
) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    engine = ScriptedEngine(chat, lambda prompt, rid: "Action: noop")

    async def main() -> tuple[list[_core.Group], int, list[_core.Group]]:
        with _core.GroupReceiver(endpoint) as receiver:
            loop, stream = noop_loop(noop_server, chat, endpoint, engine, on_policy=True)
            run = asyncio.create_task(loop.run(max_batches=2))
            first = await asyncio.to_thread(receive_groups, receiver, 2)
            await asyncio.sleep(0.5)  # the learner "trains": nothing may be generated meanwhile
            calls_while_waiting = engine.calls
            engine.set_version(1)  # the learner's weights arrive
            second = await asyncio.to_thread(receive_groups, receiver, 2)
            await asyncio.wait_for(run, 30)
            stream.close()
            return first, calls_while_waiting, second

    first, calls_while_waiting, second = asyncio.run(main())
    assert calls_while_waiting == 2 * 2 * 2  # step 1 only: 2 groups x 2 episodes x 2 turns
    for groups, version in ((first, 0), (second, 1)):
        for g in groups:
            for s in g.samples:
                assert s.dispatch_version == version and set(s.versions.tolist()) == {version}


@pytest.mark.process
@pytest.mark.parametrize(
    ("env", "action"),
    [
        ("babyai", "turn left"),
        ("searchqa", "<search>capital</search>"),
        ("sciworld", "look around"),
        ("webarena", "scroll [down]"),
    ],
)
def test_the_sync_client_speaks_each_env_servers_dialect(env: str, action: str) -> None:
    """The reference-style client of the sync loop against our real servers, in the dialect
    `http_dialect` names: an episode starts, steps and closes; SciWorld's first observation
    carries its task as the pool's does."""
    needs = {"sciworld": "java", "webarena": "chromium"}.get(env)
    if needs is not None and shutil.which(needs) is None:
        pytest.skip(f"{needs} is not installed")
    server = EnvServerProcess(env).start(timeout_s=60)
    try:
        client = HttpEnvClient(server.http, http_dialect(env))
        first = client.reset(0)
        assert isinstance(first, str) and first
        if env == "sciworld":
            assert first.startswith("Your task is")
        out = client.step(action)
        assert out.observation and not out.done
        client.close()
        with pytest.raises(EnvStepError):  # closed: refused, and said so
            client.step(action)
    finally:
        server.stop()
