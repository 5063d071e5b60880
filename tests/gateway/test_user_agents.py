"""A user's own agent (examples/openai_agent.py, written against the `openai` client) as the rollout
loop's episode player: a real BabyAI server over HTTP, the endpoint on loopback, the dispatcher
and a real `GroupReceiver`. Groups arrive whole, their samples are exactly the engine's sampled
ids; an agent that crashes, hangs or never calls loses its group (counted), nothing else."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.rollout.harness import FAST_SENDER, receive_groups

from agentgym_rl import _core
from agentgym_rl.episode.dataset import Task, TaskSource
from agentgym_rl.episode.types import Generation
from agentgym_rl.gateway.app import Gateway
from agentgym_rl.gateway.runner import AgentFailure, UserAgents, load_agent
from agentgym_rl.gateway.serve import GatewayServer, bearer_token
from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.rollout.dispatcher import Dispatcher, DispatchSummary
from agentgym_rl.rollout.schedule import TurnSchedule
from agentgym_rl.rollout.sink import LearnerStream
from scripted_engine import ScriptedEngine, babyai_policy, check_sample_arrays

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.process


class Recording(ScriptedEngine):
    def __init__(self, chat: Any) -> None:
        super().__init__(chat, babyai_policy)
        self.sampled: list[list[int]] = []
        self.prompts: list[list[int]] = []

    async def generate(self, prompt_ids: list[int], **kwargs: Any) -> Generation:
        gen = await super().generate(prompt_ids, **kwargs)
        self.prompts.append(list(prompt_ids))
        self.sampled.append(list(gen.token_ids))
        return gen


async def serve(engine: ScriptedEngine, chat: Any) -> GatewayServer:
    gateway = Gateway(
        engine,
        chat,
        model="policy",
        max_model_len=4096,
        max_tokens_per_turn=64,
        token=bearer_token(b"run secret"),
    )
    return await GatewayServer.start(gateway)


def example_agent() -> Any:
    sys.path.insert(0, str(ROOT))
    try:
        return load_agent("examples.openai_agent:agent")
    finally:
        sys.path.remove(str(ROOT))


def run_groups(
    agent: Any, babyai: EnvServerProcess, chat: Any, endpoint: str, count: int, **kw: Any
) -> tuple[DispatchSummary, list[_core.Group], Recording, GatewayServer]:
    engine = Recording(chat)

    async def main() -> tuple[DispatchSummary, list[_core.Group], GatewayServer]:
        server = await serve(engine, chat)
        players = UserAgents(
            server.gateway,
            server.url,
            server.gateway.token or "",
            agent=agent,
            env_urls={"babyai": [babyai.http]},
            **kw,
        )
        buffer = _core.TrajectoryBuffer(
            group_size=2, groups_per_step=2, max_staleness=100, max_in_flight=4, max_ready=8
        )
        source = TaskSource([Task(f"babyai_{i}", "babyai", i) for i in range(40)], seed=0)
        stream = LearnerStream([endpoint], sender_id="agents", timeout_s=0.2, **FAST_SENDER)
        dispatcher = Dispatcher(
            players,
            buffer,
            source,
            TurnSchedule.fixed(3),
            stream,
            version_source=lambda: engine.version,
            max_groups=count,
        )
        try:
            with _core.GroupReceiver(endpoint) as receiver:
                task = asyncio.create_task(dispatcher.run())
                summary = await asyncio.wait_for(task, 60)
                groups = receive_groups(receiver, summary.groups_sent, timeout_s=10)
                return summary, groups, server
        finally:
            stream.close()
            await server.close()

    summary, groups, server = asyncio.run(main())
    return summary, groups, engine, server


def test_the_example_agent_trains_through_the_endpoint(babyai_server, chat, free_port) -> None:
    summary, groups, engine, server = run_groups(
        example_agent(), babyai_server, chat, f"tcp://127.0.0.1:{free_port}", 4
    )
    assert summary.groups_sent == 4 and summary.aborted_episodes == 0
    samples = [s for g in groups for s in g.samples]
    assert all(len(g) == 2 for g in groups) and len(samples) == 8
    trained = sorted(
        tuple(s.input_ids[a:b].tolist()) for s in samples for a, b in s.turn_spans.reshape(-1, 2)
    )
    assert trained == sorted(map(tuple, engine.sampled))  # every sampled turn, once, verbatim
    for s in samples:
        check_sample_arrays(s)
        assert not s.drift and 1 <= s.turns <= 3 and s.turn_cap == 3
    assert server.gateway.dropped == 0 and not server.gateway.episodes


def test_the_example_agent_as_a_command_line(babyai_server, chat, free_port) -> None:
    """`agent.command: [python, examples/openai_agent.py]`: one process per episode, its client
    from OPENAI_BASE_URL / OPENAI_API_KEY, the reward printed last."""
    command = [sys.executable, str(ROOT / "examples" / "openai_agent.py")]
    summary, groups, engine, server = run_groups(
        None, babyai_server, chat, f"tcp://127.0.0.1:{free_port}", 1, command=command
    )
    assert summary.groups_sent == 1 and summary.aborted_episodes == 0
    samples = [s for g in groups for s in g.samples]
    assert len(samples) == 2 and all(not s.drift and 1 <= s.turns <= 3 for s in samples)
    trained = sorted(
        tuple(s.input_ids[a:b].tolist()) for s in samples for a, b in s.turn_spans.reshape(-1, 2)
    )
    assert trained == sorted(map(tuple, engine.sampled))
    assert server.gateway.dropped == 0 and not server.gateway.episodes


async def crashing(client: Any, task: Any) -> float:
    await client.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "go"}]
    )
    if task.data_idx % 2:
        raise RuntimeError("the agent's own bug")
    return 1.0


def test_a_crashing_agent_loses_only_its_group(babyai_server, chat, free_port) -> None:
    summary, groups, _, server = run_groups(
        crashing, babyai_server, chat, f"tcp://127.0.0.1:{free_port}", 6
    )
    lost = summary.buffer["aborted"]
    assert lost >= 1 and summary.groups_sent == 6 - lost
    assert all(int(g.task_id.split("_")[1]) % 2 == 0 for g in groups)
    assert summary.aborted_episodes >= lost and server.gateway.dropped >= lost
    assert not server.gateway.episodes  # nothing left behind to train later


async def silent(client: Any, task: Any) -> float:
    return 1.0  # never calls the endpoint


async def hanging(client: Any, task: Any) -> float:
    await client.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "go"}]
    )
    await asyncio.sleep(60)
    return 1.0


@pytest.mark.parametrize("agent", [silent, hanging])
def test_an_agent_without_calls_or_reward_fails_clearly(agent: Any, chat: Any) -> None:
    engine = Recording(chat)

    async def main() -> str:
        server = await serve(engine, chat)
        players = UserAgents(
            server.gateway, server.url, server.gateway.token or "", agent=agent, timeout_s=0.5
        )
        from agentgym_rl.episode.types import EpisodePlan, TurnBudget

        plan = EpisodePlan(Task("babyai_1", "babyai", 1), 0, TurnBudget(0, 3), "g1-e0")
        try:
            with pytest.raises(AgentFailure) as failed:
                await players.play(plan)
            assert server.gateway.dropped == 1 and not server.gateway.episodes
            return str(failed.value)
        finally:
            await server.close()

    message = asyncio.run(main())
    assert (
        ("made no call" in message) if agent is silent else ("gave no reward in 0.5 s" in message)
    )


COMMAND_AGENT = """
import json, os, sys
import httpx
from openai import OpenAI

task = json.loads(os.environ["AGENTGYM_TASK"])
key = os.environ["AGENTGYM_EPISODE_KEY"]
client = OpenAI(default_headers={"X-Episode-Key": key})  # OPENAI_BASE_URL, OPENAI_API_KEY
client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "go"}])
if sys.argv[1] == "print":
    print(json.dumps({"reward": 0.5}))
elif sys.argv[1] == "post":
    headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
    url = os.environ["OPENAI_BASE_URL"] + "/episodes/" + key + "/reward"
    httpx.post(url, json={"reward": 0.25}, headers=headers).raise_for_status()
else:
    sys.exit("the agent broke: " + task["item_id"])
"""


@pytest.mark.parametrize(("how", "reward"), [("print", 0.5), ("post", 0.25), ("crash", None)])
def test_a_command_line_agent(how: str, reward: float | None, chat: Any, tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(COMMAND_AGENT)
    engine = Recording(chat)

    async def main() -> Any:
        server = await serve(engine, chat)
        players = UserAgents(
            server.gateway,
            server.url,
            server.gateway.token or "",
            command=[sys.executable, str(script), how],
        )
        from agentgym_rl.episode.types import EpisodePlan, TurnBudget

        plan = EpisodePlan(Task("babyai_7", "babyai", 7), 0, TurnBudget(0, 3), "g2-e1")
        try:
            if reward is None:
                with pytest.raises(AgentFailure, match="exited 1: the agent broke: babyai_7"):
                    await players.play(plan)
                return None
            return await players.play(plan)
        finally:
            await server.close()

    played = asyncio.run(main())
    if reward is not None:
        assert played.sample.reward == reward and played.sample.turns == 1
        assert played.sample.input_ids[played.sample.loss_mask == 1].tolist() == engine.sampled[0]


def test_the_runner_counts_calls_and_samples_as_told(chat: Any) -> None:
    """Each episode's calls are counted in the runner's metrics and sampled with its settings
    (held-out episodes: the evaluation's temperature)."""
    engine = Recording(chat)
    seen: list[dict[str, Any]] = []
    generate = engine.generate

    async def spy(prompt_ids: list[int], temperature: float = 1.0, **kwargs: Any) -> Generation:
        seen.append({"temperature": temperature, **kwargs})
        return await generate(prompt_ids, **kwargs)

    engine.generate = spy  # type: ignore[method-assign]

    async def main() -> UserAgents:
        server = await serve(engine, chat)
        players = UserAgents(
            server.gateway,
            server.url,
            server.gateway.token or "",
            agent=crashing,
            sampling={"temperature": 0.0},
        )
        from agentgym_rl.episode.types import EpisodePlan, TurnBudget

        try:
            await players.play(EpisodePlan(Task("babyai_2", "babyai", 2), 0, TurnBudget(0, 3), "k"))
            return players
        finally:
            await server.close()

    players = asyncio.run(main())
    assert [k["temperature"] for k in seen] == [0.0]
    assert players.metrics.generate_calls == 1
    assert players.metrics.generated_tokens == len(engine.sampled[0])
    # the prompt is counted too: in-flight sizing reads a request's length from both
    assert players.metrics.prompt_tokens == len(engine.prompts[0]) > 0
