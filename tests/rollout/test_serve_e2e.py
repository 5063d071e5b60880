"""`run_service` end to end: the real vLLM engine, a BabyAI server, a `GroupReceiver` as the
learner and a `WeightPublisher` pushing a new policy mid-run through `weights_endpoint`.

Admission makes the update point deterministic: with `groups_per_step=1, max_staleness=0` the
buffer admits one group at the engine's starting version `v0` (earlier tests may have moved it;
the staleness budget counts from the version a server starts at), then nothing until the
version moves. The test receives that group, publishes
`v0 + 1`, and the service's subscriber applies it; the next group is admitted at `v0 + 1`, in
the next ScalingInter stage (`versions_per_stage=1`, caps 2 up to `v0`, then 3).

Both streams are signed with a secret handed over as `train` does (AGENTGYM_RL_SECRET); a
learner holding another secret stops the service with the reason.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from pathlib import Path

import numpy as np
import pytest
from harness import EnvServerProcess, receive_groups

from agentgym_rl import _core
from agentgym_rl.auth import ENV_VAR
from agentgym_rl.config import RolloutConfig, load_rollout_config
from agentgym_rl.rollout.schedule import TurnSchedule
from agentgym_rl.rollout.service import run_service
from agentgym_rl.weights.publisher import WeightPublisher
from agentgym_rl.weights.signing import Unauthenticated
from vllm_fixtures import EngineHandle

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]


def check_sample(sample: _core.Sample, schedule: TurnSchedule) -> None:
    n = len(sample.input_ids)
    assert len(sample.loss_mask) == len(sample.logprobs) == len(sample.versions) == n
    spans = sample.turn_spans.reshape(-1, 2)
    assert len(spans) == sample.turns >= 1
    expected = np.zeros(n, dtype=np.uint8)
    for start, end in spans:
        assert 0 <= start < end <= n
        expected[start:end] = 1
    assert np.array_equal(sample.loss_mask, expected)
    masked = sample.loss_mask == 1
    lps = sample.logprobs
    assert np.all(np.isfinite(lps[masked])) and np.all(lps[masked] <= 0.0)
    assert np.all(lps[~masked] == 0.0)
    assert np.all(sample.versions[masked] >= sample.dispatch_version)
    budget = schedule.budget(sample.dispatch_version)
    assert (sample.stage, sample.turn_cap) == (budget.stage, budget.turn_cap)
    assert sample.turns <= sample.turn_cap
    assert sample.status in {"done", "turn_cap", "truncated"}


SECRET = b"serve-e2e-secret-0123456789abcdef"


def service_config(
    handle: EngineHandle,
    env_server: str,
    endpoint: str,
    weights: str,
    log_dir: Path,
    stages: list[int],
) -> RolloutConfig:
    return load_rollout_config(
        ROOT / "configs" / "rollout" / "babyai_tiny.yaml",
        [
            f"model={handle.model_dir}",
            f"envs.0.addresses=['{env_server}']",
            f"learner.endpoints=['{endpoint}']",
            f"weights_endpoint={weights}",
            f"log_dir={log_dir}",
            f"dataset.split={ROOT / 'envs/agentgym_envs/babyai/data/train.json'}",
            "dataset.group_size=2",
            "engine.max_model_len=1024",
            "engine.max_tokens_per_turn=12",
            f"scaling_inter.turn_caps={stages}",
            "scaling_inter.versions_per_stage=1",
            "buffer.groups_per_step=1",
            "buffer.max_staleness=0",
            "buffer.max_in_flight=4",
            "status_interval_s=0.5",
        ],
    )


def test_service_applies_published_weights_mid_run(
    vllm_engine: EngineHandle,
    babyai_server: EnvServerProcess,
    free_port: int,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handle, eng = vllm_engine, vllm_engine.engine
    v0 = eng.version
    stages = [2] * (v0 + 1) + [3]
    schedule = TurnSchedule(stages, versions_per_stage=1)
    endpoint = f"tcp://127.0.0.1:{free_port}"
    monkeypatch.setenv(ENV_VAR, SECRET.decode())
    publisher = WeightPublisher("tcp://127.0.0.1:0", chunk_bytes=256 << 10, secret=SECRET)
    config = service_config(
        handle, babyai_server.zmq, endpoint, publisher.endpoint, tmp_path, stages
    )
    before = 1  # the budget of the version the service started at, whatever v0 is
    new_weights = handle.perturbed(seed=41, scale=0.05)
    t0 = time.monotonic()
    caplog.set_level(logging.INFO, logger="agentgym_rl.rollout.service")
    try:
        with _core.GroupReceiver(endpoint, secret=SECRET) as receiver:
            service = asyncio.run_coroutine_threadsafe(
                run_service(config, eng, quiet=True, max_groups=before + 1), handle.loop
            )
            assert publisher.wait_for_servers(1, timeout_s=10) == 1
            groups = receive_groups(receiver, before, timeout_s=30)
            assert not service.done()  # admission waits for the new version
            result = publisher.publish(v0 + 1, new_weights, timeout_s=30)
            assert result.ok and result.acked, result
            assert eng.version == v0 + 1
            groups += receive_groups(receiver, 1, timeout_s=30)
            summary = service.result(30)
    finally:
        publisher.close()
        if eng.version == v0 + 1:
            handle.committed(v0 + 1, new_weights)  # later tests compare against these weights
    elapsed = time.monotonic() - t0

    assert summary.groups_sent == before + 1 and summary.unsent_groups == 0
    assert summary.aborted_episodes == 0
    samples = [s for g in groups for s in g.samples]
    assert all(g.env == "babyai" and len(g) == 2 for g in groups)
    assert len(samples) == 2 * (before + 1)
    for s in samples:
        check_sample(s, schedule)
    old = [s for s in samples if s.dispatch_version == v0]
    new = [s for s in samples if s.dispatch_version == v0 + 1]
    assert len(old) == 2 * before and len(new) == 2
    assert all(set(s.versions[s.loss_mask == 1].tolist()) == {v0} for s in old)
    assert all(s.turn_cap == 2 for s in old) and all(s.turn_cap == 3 for s in new)
    assert any(v0 + 1 in s.versions[s.loss_mask == 1].tolist() for s in new)
    assert all(math.isfinite(s.reward) for s in samples)
    assert (tmp_path / "metrics.jsonl").exists()
    assert elapsed < 60
    # at exit the server logs what the learner endpoint took: all sent groups acknowledged
    (exit_stats,) = [r.args for r in caplog.records if "at exit" in r.getMessage()]
    assert isinstance(exit_stats, tuple) and exit_stats[0] == 0
    assert exit_stats[1]["sent"] == exit_stats[1]["acked"] == before + 1
    assert exit_stats[1]["unauthenticated"] == 0
    assert receiver.stats()["unauthenticated"] == 0 and publisher.refusals.total == 0


def test_a_learner_holding_another_secret_stops_the_service(
    vllm_engine: EngineHandle,
    babyai_server: EnvServerProcess,
    free_port: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handle, eng = vllm_engine, vllm_engine.engine
    monkeypatch.setenv(ENV_VAR, SECRET.decode())
    publisher = WeightPublisher("tcp://127.0.0.1:0", secret=SECRET[::-1])
    endpoint = f"tcp://127.0.0.1:{free_port}"
    config = service_config(handle, babyai_server.zmq, endpoint, publisher.endpoint, tmp_path, [2])
    try:
        service = asyncio.run_coroutine_threadsafe(
            run_service(config, eng, quiet=True, max_groups=1), handle.loop
        )
        deadline = time.monotonic() + 30
        while not service.done():
            assert time.monotonic() < deadline, "the service kept waiting"
            publisher.serve(0.05)
        with pytest.raises(Unauthenticated, match="same secret"):
            service.result(0)
        assert publisher.refusals.total >= 1 and not publisher.servers
    finally:
        publisher.close()
