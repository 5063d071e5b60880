"""Judged groups through the real rollout loop: a BabyAI env server, the scripted engine, a real
`GroupReceiver`, and the scripted judge in its own uvicorn process (tests/scripted_judge.py).
The oracle judge agrees with the env on every episode (the plumbing: transcripts reach the
judge whole, scores come back to the right episodes); the groups the learner gets carry the
judged rewards; a judge that stays down drops its groups visibly, accounted in the ledger; a
slow judge does not hold the agent loop up."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.rollout.harness import FAST_SENDER, receive_groups

from agentgym_rl import _core
from agentgym_rl.config.rollout import EnvSettings, JudgeConfig, RewardConfig
from agentgym_rl.episode.agent import AgentLoop
from agentgym_rl.episode.dataset import Task, TaskSource
from agentgym_rl.episode.log import EpisodeLog, read_episodes
from agentgym_rl.episode.types import EnvSpec
from agentgym_rl.judging.serving import judges_for
from agentgym_rl.processes.ports import free_port as a_free_port
from agentgym_rl.report.groups import account
from agentgym_rl.rollout.dispatcher import Dispatcher, DispatchSummary
from agentgym_rl.rollout.schedule import TurnSchedule
from agentgym_rl.rollout.sink import LearnerStream
from agentgym_rl.wire.ledger import GroupLedger
from asgi_procs import AsgiProc
from scripted_engine import ScriptedEngine, babyai_policy

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def judge_server() -> Iterator[AsgiProc]:
    proc = AsgiProc("scripted_judge:app", ready_path="/stats")
    yield proc.start()
    proc.stop()


def reward(url: str, model: str, source: str = "judge", **judge: object) -> RewardConfig:
    config = JudgeConfig(
        model=model, url=url, retries=judge.pop("retries", 1), backoff_s=0.01, **judge
    )  # type: ignore[arg-type]
    return RewardConfig(source=source, judge=config)  # type: ignore[arg-type]


async def run_judged(
    babyai_server, chat, rule: RewardConfig, tmp_path: Path, groups: int, expect: int
) -> tuple[DispatchSummary, list[_core.Group], dict[str, int | float]]:
    endpoint = f"tcp://127.0.0.1:{a_free_port()}"
    pool = _core.EnvPool([_core.EnvServer("babyai", babyai_server.zmq)], health_interval_s=0.1)
    engine = ScriptedEngine(chat, babyai_policy, delay_s=0.002)
    spec = EnvSpec(reward=rule)
    agent = AgentLoop(
        engine, pool, chat, envs={"babyai": spec}, max_model_len=4096, max_tokens_per_turn=64
    )
    buffer = _core.TrajectoryBuffer(
        group_size=3, groups_per_step=2, max_staleness=100, max_in_flight=4, max_ready=8
    )
    tasks = [
        Task(f"babyai_{i}", "babyai", i, reference=f"the answer of babyai_{i}") for i in range(40)
    ]
    source = TaskSource(tasks, seed=0)
    stream = LearnerStream([endpoint], sender_id="test", timeout_s=0.2, **FAST_SENDER)
    settings = [EnvSettings(env="babyai", reward=rule)]
    async with judges_for(settings, tmp_path) as judges:
        d = Dispatcher(
            agent,
            buffer,
            source,
            TurnSchedule.fixed(8),
            stream,
            version_source=lambda: engine.version,
            max_groups=groups,
            episode_log=EpisodeLog(tmp_path / "rollout-0" / "episodes.jsonl", tokenizer="chatml"),
            ledger=GroupLedger(tmp_path / "rollout-0"),
            judges=judges,
        )
        with _core.GroupReceiver(endpoint) as receiver:
            task = asyncio.create_task(d.run())
            received = await asyncio.to_thread(receive_groups, receiver, expect)
            try:
                summary = await asyncio.wait_for(task, 60)
            finally:
                await pool.shutdown()
                stream.close()
        d.ledger.close(clean=True)  # type: ignore[union-attr]
        counters = judges["babyai"].counters.snapshot()
    return summary, received, counters


def test_the_oracle_judge_agrees_with_the_env_and_its_scores_are_trained(
    babyai_server, chat, judge_server: AsgiProc, tmp_path: Path
) -> None:
    rule = reward(f"{judge_server.url}/v1", "oracle")
    summary, groups, counters = asyncio.run(run_judged(babyai_server, chat, rule, tmp_path, 6, 6))
    assert summary.aborted_episodes == 0 and counters["judged_episodes"] == 18
    assert counters["judge_calls"] == 18 and counters["judge_failed_groups"] == 0
    rewards = sorted(s.reward for g in groups for s in g.samples)
    assert set(rewards) <= {0.0, 1.0}  # the judged score is the reward (no shaping set)

    logged = list(read_episodes(tmp_path / "rollout-0" / "episodes.jsonl"))
    assert len(logged) == 18 and all(e.judge is not None for e in logged)
    agree = [e.judge["success"] == e.success for e in logged if e.judge is not None]
    assert all(agree), "the oracle judge reads BabyAI's own verdict from the transcript"
    assert any(e.success for e in logged) and not all(e.success for e in logged)
    for e in logged:
        assert e.reward == e.judge["score"] and "Turn 1, the agent:" in e.judge["prompt"]
        # the task's reference answer (its split's `reference`) reaches its own prompt
        assert f"A reference answer: the answer of {e.item_id}\n" in e.judge["prompt"]
        # the env's answer to the last turn, in no context, is in the log and the judge's prompt
        assert e.last_observation and e.last_observation in e.judge["prompt"]
        assert ("You completed the goal." in e.last_observation) == e.success
    assert sorted(e.reward for e in logged) == rewards


def test_env_plus_judge_mixes_the_rewards_and_keeps_the_envs_success(
    babyai_server, chat, judge_server: AsgiProc, tmp_path: Path
) -> None:
    rule = reward(f"{judge_server.url}/v1", "oracle-group", source="env+judge", mode="group")
    rule = rule.model_copy(update={"judge_weight": 0.25})
    _summary, _groups, counters = asyncio.run(run_judged(babyai_server, chat, rule, tmp_path, 4, 4))
    assert counters["judge_calls"] == 4  # one per group
    for e in read_episodes(tmp_path / "rollout-0" / "episodes.jsonl"):
        assert e.judge is not None and e.judge["mode"] == "group"
        mixed = 0.75 * e.judge["env_reward"] + 0.25 * e.judge["score"]
        assert e.reward == pytest.approx(mixed) and e.judge["success"] == e.success


def test_a_judge_that_stays_down_drops_its_groups_visibly(
    babyai_server, chat, tmp_path: Path
) -> None:
    rule = reward(f"http://127.0.0.1:{a_free_port()}/v1", "oracle", retries=1)
    summary, groups, counters = asyncio.run(run_judged(babyai_server, chat, rule, tmp_path, 3, 0))
    assert groups == [] and summary.groups_sent == 0
    assert summary.aborted_episodes == summary.episodes == 9
    assert counters["judge_failed_groups"] == 3 and counters["judged_episodes"] == 0
    acc = account(tmp_path)
    assert (acc.dispatched, acc.made, acc.aborted) == (3, 0, 3)


def test_a_slow_judge_does_not_hold_the_agent_loop_up(
    babyai_server, chat, judge_server: AsgiProc, tmp_path: Path
) -> None:
    rule = reward(f"{judge_server.url}/v1", "oracle-slow1", mode="group")
    _summary, groups, counters = asyncio.run(run_judged(babyai_server, chat, rule, tmp_path, 4, 4))
    assert len(groups) == 4 and counters["judge_calls"] == 4
    stats = json.loads(judge_server.get("/stats")[1])
    # the groups in flight were judged at once, while the loop went on playing
    assert stats["max_open:oracle-slow1"] >= 2
