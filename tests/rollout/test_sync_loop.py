"""The `--sync` baseline plays the async agent's turn rule: same samples from the same turns."""

from __future__ import annotations

import asyncio

from agentgym_rl import _core
from agentgym_rl.episode.agent import AgentLoop
from agentgym_rl.episode.dataset import Task, TaskSource
from agentgym_rl.episode.types import EnvSpec, EpisodePlan
from agentgym_rl.rollout.schedule import TurnSchedule
from agentgym_rl.rollout.sink import LearnerStream
from agentgym_rl.rollout.sync_loop import SyncLoop
from agentgym_rl.trajectory import ChatTokenizer
from env_servers import EnvServerProc
from scripted_engine import ScriptedEngine

# refused by the env, no action at all, then accepted turns (GoTo never ends on a turn)
SCRIPT = {0: "Action: fly to the moon", 1: "I am lost"}


def policy(prompt: str, request_id: str) -> str:
    return SCRIPT.get(int(request_id.rsplit("-t", 1)[1]), "Action: turn left")


def test_sync_and_async_agents_make_the_same_sample(
    babyai_server: EnvServerProc, chat: ChatTokenizer, free_port: int
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
            addresses={"babyai": [babyai_server.http]},
            envs=specs,
            group_size=1,
            groups_per_step=1,
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
