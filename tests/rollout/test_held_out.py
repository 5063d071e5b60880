"""Held-out evaluation inside the rollout service: when it runs, what it records, how it ends."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path

import pytest
import uvloop
from harness import ScriptedEngine, babyai_policy, receive_groups
from test_dispatcher import service_config

from agentgym_rl import _core
from agentgym_rl.rollout.service import run_service
from waiting import await_until

ROOT = Path(__file__).resolve().parents[2]
GOTO_TEST = ROOT / "envs/agentgym_envs/babyai/data/goto_test.json"


def test_evaluates_at_start_every_k_and_final_then_stops(
    babyai_server, chat, free_port, tmp_path
) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    config = service_config(
        babyai_server,
        endpoint,
        tmp_path,
        f"eval={{split: '{GOTO_TEST}', every_versions: 2, final_version: 5, limit: 6, "
        "samples_per_task: 2, turn_cap: 2}",
    )
    engine = ScriptedEngine(chat, babyai_policy, delay_s=0.01)

    async def evaluated_twice() -> bool:
        path = tmp_path / "eval.jsonl"
        return path.exists() and len(path.read_text().splitlines()) >= 2

    async def main() -> object:
        with _core.GroupReceiver(endpoint) as receiver:
            task = asyncio.create_task(run_service(config, engine, chat=chat, quiet=True))
            for version in range(1, 6):  # the learner's weight versions, one per received group
                await asyncio.to_thread(receive_groups, receiver, 1)
                await asyncio.sleep(0.3)
                if version == 5:  # the final version waits for a periodic evaluation to be had
                    await await_until(evaluated_twice, 60, "a periodic evaluation after v0")
                engine.set_version(version)
            while not task.done():  # keep taking groups until the service stops by itself
                await asyncio.to_thread(receiver.recv, 0.05)
            return await asyncio.wait_for(task, 60)

    uvloop.run(main())
    records = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    versions = [r["version"] for r in records]
    assert versions[0] == 0 and versions[-1] == 5
    assert all(b > a for a, b in itertools.pairwise(versions))
    periodic = versions[:-1]  # each periodic evaluation is in a new period of 2 versions
    assert all(b // 2 > a // 2 for a, b in itertools.pairwise(periodic))
    assert len(periodic) >= 2
    for r in records:
        assert r["episodes"] == 12 and r["samples_per_task"] == 2 and r["turn_cap"] == 2
        assert 0.0 <= r["success"] <= r["pass"] <= 1.0
        assert set(r["by_category"]) <= {
            "GoToObj",
            "GoToLocal",
            "GoToRedBall",
            "GoToRedBallGrey",
            "GoToRedBlueBall",
        }
    # each held-out episode is logged on its own, beside the aggregate records
    episodes = [json.loads(x) for x in (tmp_path / "eval_episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 12 * len(records)
    assert [e["version"] for e in episodes[::12]] == versions
    for e in episodes:
        assert 1 <= e["turns"] <= 2 and e["generated_tokens"] > 0 and e["sample"] in (0, 1)
        assert e["success"] == (e["reward"] > 0) and e["item_id"].startswith("babyai_")
    # evaluation episodes are not training episodes: none of them went to the learner
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(m["turns_max"] <= 3 for m in metrics)
    assert "success_rate" in metrics[-1] and "version" in metrics[-1]


class _UpdatableEngine(ScriptedEngine):
    """A scripted engine that takes weight updates (the version is all that changes)."""

    async def update_weights(self, version: int, named_tensors: object) -> float:
        self.set_version(version)
        return 0.0


@pytest.mark.parametrize("hold", [True, False], ids=["hold", "no-hold"])
def test_an_evaluation_holds_weight_updates(
    babyai_server, chat, free_port, tmp_path, hold: bool
) -> None:
    import torch

    from agentgym_rl.weights.publisher import WeightPublisher

    endpoint = f"tcp://127.0.0.1:{free_port}"
    publisher = WeightPublisher("tcp://127.0.0.1:0")
    config = service_config(
        babyai_server,
        endpoint,
        tmp_path,
        f"weights_endpoint={publisher.endpoint}",
        f"eval={{split: '{GOTO_TEST}', every_versions: 100, final_version: 1, limit: 6, "
        f"samples_per_task: 2, turn_cap: 3, hold_weights: {str(hold).lower()}}}",
    )
    engine = _UpdatableEngine(chat, babyai_policy, delay_s=0.6)  # evaluation takes >= 1.8 s

    async def main() -> float:
        with _core.GroupReceiver(endpoint) as receiver:
            task = asyncio.create_task(run_service(config, engine, chat=chat, quiet=True))
            assert await asyncio.to_thread(publisher.wait_for_servers, 1, 10.0) == 1
            await asyncio.sleep(0.3)  # the evaluation at version 0 is under way
            t0 = time.monotonic()
            weights = {"w": torch.zeros(4)}
            result = await asyncio.to_thread(publisher.publish, 1, weights, 30.0)
            applied_after = time.monotonic() - t0
            assert result.ok, result
            while not task.done():
                await asyncio.to_thread(receiver.recv, 0.05)
            await asyncio.wait_for(task, 60)
            return applied_after

    try:
        applied_after = uvloop.run(main())
    finally:
        publisher.close()
    first = json.loads((tmp_path / "eval.jsonl").read_text().splitlines()[0])
    assert first["version"] == 0
    if hold:  # the update waited for the evaluation: its record is version 0's alone
        assert first["versions"] == [0, 0]
        assert applied_after > 0.6
    else:  # applied at once, mid-evaluation: later turns were generated by version 1
        assert first["versions"] == [0, 1]
