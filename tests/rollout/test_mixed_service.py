"""A rollout service on two envs at once (real BabyAI and Maze servers, the scripted engine): groups
of both arrive in the mix's proportions, each env's episodes keep its own turn cap, the held-out
evaluation covers each env's split at its cap, metrics break down by env, and the cursor written
at exit resumes the mix."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections import Counter
from pathlib import Path

import uvloop
from harness import ScriptedEngine, babyai_policy, receive_groups

from agentgym_rl import _core
from agentgym_rl.config import load_rollout_config
from agentgym_rl.rollout.service import run_service, task_source

ROOT = Path(__file__).resolve().parents[2]


def _config(babyai: str, maze: str, endpoint: str, log_dir: Path, *extra: str) -> object:
    return load_rollout_config(
        ROOT / "configs" / "rollout" / "babyai_tiny.yaml",
        [
            f"envs=[{{env: babyai, addresses: ['{babyai}'], eval_split: goto_test}}, "
            f"{{env: maze, addresses: ['{maze}'], eval_split: test, "
            "scaling_inter: {turn_caps: [2]}}]",
            "dataset={mix: [{env: babyai, split: goto_train, weight: 3}, "
            "{env: maze, split: train, weight: 1}], group_size: 2}",
            f"learner.endpoints=['{endpoint}']",
            f"log_dir={log_dir}",
            "scaling_inter.turn_caps=[3]",
            "status_interval_s=0.1",
            "eval={every_versions: 100, limit: 4}",
            *extra,
        ],
    )


def test_two_envs_in_one_service(babyai_server, spawn_server, chat, free_port, tmp_path) -> None:
    maze = spawn_server("maze")
    endpoint = f"tcp://127.0.0.1:{free_port}"
    config = _config(babyai_server.zmq, maze.zmq, endpoint, tmp_path)
    engine = ScriptedEngine(chat, babyai_policy, delay_s=0.005)

    async def main() -> list[_core.Group]:
        with _core.GroupReceiver(endpoint) as receiver:
            task = asyncio.create_task(run_service(config, engine, chat=chat, quiet=True))
            groups: list[_core.Group] = []
            for version in range(1, 17):  # a learner's versions, 2 groups a step (admission)
                groups += await asyncio.to_thread(receive_groups, receiver, 2)
                engine.set_version(version)
            os.kill(os.getpid(), signal.SIGTERM)
            while not task.done():
                await asyncio.to_thread(receiver.recv, 0.05)
            await task
            return groups

    groups = uvloop.run(main())
    envs = Counter(g.env for g in groups)
    assert set(envs) == {"babyai", "maze"} and envs["babyai"] > envs["maze"]  # weights 3:1
    for g in groups:
        assert g.task_id.startswith(f"{g.env}_")
        cap = 2 if g.env == "maze" else 3  # maze's own turn caps, babyai the rollout's
        assert all(s.turns <= cap for s in g.samples)

    [record] = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert record["version"] == 0 and set(record["by_env"]) == {"babyai", "maze"}
    assert record["by_env"]["maze"]["turn_cap"] == 2 and record["by_env"]["babyai"]["turn_cap"] == 3
    assert record["by_env"]["maze"]["episodes"] == 4 and record["episodes"] == 8
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert set(metrics[-1]["by_env"]) == {"babyai", "maze"}

    cursor = json.loads((tmp_path / "cursor.json").read_text())
    assert cursor["draws"] >= len(groups) and len(cursor["sources"]) == 2
    resumed = task_source(
        config.model_copy(update={"dataset": config.dataset.model_copy(update={"resume": True})})
    )
    assert resumed.cursor.draws == cursor["draws"]  # the next task is the one after the last drawn
