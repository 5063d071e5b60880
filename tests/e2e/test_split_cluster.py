"""The split-cluster topology on one machine (docs/split-clusters.md): two `serve-rollouts`
processes (real vLLM, tiny fp32 model) and one `learn` under torchrun with data parallel 2,
wired only by tcp loopback addresses, one BabyAI env server, three training steps.

All three start together. Staleness 0 with one group per step per rollout server puts the run
in lockstep: a server admits one group per policy version, so every step takes one group from
each server, nothing is stale, and the first publish (after step 1) comes after both servers
subscribed to the weights endpoint (their register messages are queued by ZeroMQ until the
learner binds). The rollout servers are stopped (SIGTERM) only after the learner has exited, so
every group is in a known place when the books are closed:

- learner: received = used + dropped + rejected, used = steps x groups_per_step, dropped = 0;
- each rollout server: admitted = running + ready + released + filtered + stale + aborted, and
  groups_sent = released >= steps (its last metrics record, written at exit);
- across processes: sum(groups_sent) - learner received = groups still un-acknowledged when the
  learner exited, at most `receive.window` per sender; when there are any, a rollout server
  logs that not every sent group was acknowledged;
- weights: every published version was acked by both servers and both logged applying it, and
  the learner sent one copy per update (fanout 1: the first server to register relays every
  update to the other);
- authentication: every process reads the secret file `agentgym-rl secret` wrote
  (`auth.secret_file`); two strangers that try to stream groups to the learner, one without the
  secret and one with another, are refused (`AuthenticationError`), and the learner logs each
  refusal with the stranger's address; nothing of theirs reaches the books above.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pytest

from agentgym_rl import _core
from agentgym_rl.auth import ENV_VAR
from agentgym_rl.cli import main as cli_main
from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.processes.ports import free_port
from vllm_fixtures import tiny_corpus

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
STEPS = 3
GROUPS_PER_STEP = 2  # one group per data-parallel rank
WINDOW = 2  # learner credits per rollout server
UNACKED_WARNING = "not every sent group was acknowledged before exit"


@dataclass
class Proc:
    """A child process in its own session (so teardown can end its whole tree by group id)."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    handle: TextIO

    def text(self) -> str:
        self.handle.flush()
        return self.log.read_text(errors="replace")

    def tail(self, n: int = 4000) -> str:
        return f"--- {self.name} ({self.log}) ---\n{self.text()[-n:]}"

    def kill_tree(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=30)
        self.handle.close()


def spawn(name: str, cmd: list[str], tmp: Path, env: dict[str, str]) -> Proc:
    log = tmp / f"{name}.log"
    handle = log.open("w")
    popen = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )
    return Proc(name, popen, log, handle)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in reversed(started):
        proc.kill_tree()


def rollout_cmd(
    i: int, model: Path, env_server: str, recv: str, weights: str, log_dir: Path, secret: Path
) -> list[str]:
    overrides = [
        f"model={model}",
        f"auth.secret_file={secret}",
        f"envs.0.addresses=['{env_server}']",
        f"learner.endpoints=['{recv}']",
        f"learner.sender_id=rollout-{i}",
        f"weights_endpoint={weights}",
        f"log_dir={log_dir}",
        f"dataset.shuffle_seed={i}",
        "dataset.group_size=2",
        f"engine.seed={i}",
        "engine.max_model_len=1024",
        "engine.max_tokens_per_turn=16",
        "scaling_inter.turn_caps=[2]",
        "buffer.groups_per_step=1",  # this server's share of the learner's 2 per step
        "buffer.max_staleness=0",  # lockstep: one group per server per version
        "buffer.max_in_flight=2",
        "buffer.max_ready=4",
        "status_interval_s=1.0",
    ]
    cli = [sys.executable, "-m", "agentgym_rl.cli", "serve-rollouts"]
    return [*cli, "--config", "configs/rollout/babyai_tiny.yaml", *overrides]


def learner_cmd(model: Path, recv: str, weights: str, tmp: Path, secret: Path) -> list[str]:
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2"]
    torchrun += ["--master_addr=127.0.0.1", f"--master_port={free_port()}"]
    overrides = [
        f"model={model}",
        f"auth.secret_file={secret}",
        "parallel.dp=2",
        f"receive.bind={recv}",
        f"receive.window={WINDOW}",
        f"groups_per_step={GROUPS_PER_STEP}",
        "max_staleness=0",
        f"weights.endpoint={weights}",
        "weights.every_steps=1",
        "weights.timeout_s=60",
        "weights.fanout=1",  # a chain: one real rollout server relays every update to the other
        f"checkpoint.dir={tmp / 'ckpt'}",
        f"max_steps={STEPS}",
        "optimizer.warmup_steps=0",
        # One row per micro-batch, so no row is padded: the learner rejects right-padded rows
        # (batch.collate puts position 0 on padding, model._check_positions wants 0..S-1 on
        # every row). Drop this once that is fixed; equal-length test groups never hit it.
        "micro_batch_tokens=1",
        f"log_dir={tmp / 'learn'}",
    ]
    cli = ["-m", "agentgym_rl.cli", "learn", "--config", "configs/learn/babyai_tiny.yaml"]
    return [*torchrun, *cli, *overrides]


@pytest.mark.slow
def test_two_rollout_servers_and_a_dp2_learner_keep_consistent_books(
    tmp_path: Path, procs: list[Proc], spawn_server: Callable[..., EnvServerProcess]
) -> None:
    from agentgym_rl.policy_creation import create_tiny_model

    t0 = time.monotonic()
    model = create_tiny_model(tmp_path / "model", corpus=tiny_corpus(), vocab_size=320, seed=0)
    babyai = spawn_server("babyai")
    recv, weights = (f"tcp://127.0.0.1:{free_port()}" for _ in range(2))
    secret = tmp_path / "cluster-secret"
    assert cli_main(["secret", str(secret)]) == 0
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "VLLM_LOGGING_LEVEL": "WARNING"}
    env.pop(ENV_VAR, None)
    rollouts = [
        spawn(
            f"rollout-{i}",
            rollout_cmd(i, model, babyai.zmq, recv, weights, tmp_path / f"rollout-{i}", secret),
            tmp_path,
            env,
        )
        for i in range(2)
    ]
    procs.extend(rollouts)
    learner = spawn(
        "learner",
        learner_cmd(model, recv, weights, tmp_path, secret),
        tmp_path,
        {**env, "OMP_NUM_THREADS": "1"},
    )
    procs.append(learner)
    strangers = {"unsigned": None, "other secret": b"not-the-cluster-secret-0123456789"}
    for name, key in strangers.items():
        with _core.GroupSender(recv, f"stranger-{name}", secret=key) as stranger:
            with pytest.raises(_core.AuthenticationError):
                stranger.wait_connected(120)
    try:
        rc = learner.popen.wait(timeout=270)
    except subprocess.TimeoutExpired:
        tails = "\n".join(p.tail(1500) for p in rollouts)
        pytest.fail(f"learner did not finish {STEPS} steps in time\n{learner.tail()}\n{tails}")
    assert rc == 0, learner.tail()
    for proc in rollouts:  # only now: nothing is in flight towards a live learner any more
        os.kill(proc.popen.pid, signal.SIGTERM)
    for proc in rollouts:
        assert proc.popen.wait(timeout=90) == 0, proc.tail()
    elapsed = time.monotonic() - t0

    # learner books
    steps = records(tmp_path / "learn" / "metrics.jsonl")
    assert [s["step"] for s in steps] == list(range(1, STEPS + 1))
    last = steps[-1]
    assert last["groups_used"] == STEPS * GROUPS_PER_STEP
    assert last["groups_rejected"] == 0, last["rejected_reasons"]
    assert last["groups_dropped"] == 0  # lockstep: every group is from the current version
    received = last["groups_received"]
    assert received == last["groups_used"] + last["groups_dropped"] + last["groups_rejected"]

    # each rollout server's books, from the record it wrote at exit
    sent = []
    for i in range(len(rollouts)):
        final = records(tmp_path / f"rollout-{i}" / "metrics.jsonl")[-1]
        buf = final["buffer"]
        buckets = ("running", "ready", "released", "filtered", "stale", "aborted")
        assert buf["admitted"] == sum(buf[k] for k in buckets), buf
        assert buf["running"] == 0 and final["groups_sent"] == buf["released"], final
        assert final["groups_sent"] >= STEPS, final  # every step took a group from each server
        sent.append(final["groups_sent"])

    # across processes: what was sent and never taken was still un-acknowledged at exit
    unacked = sum(sent) - received
    assert 0 <= unacked <= WINDOW * len(rollouts), (sent, received)
    warned = [UNACKED_WARNING in proc.text() for proc in rollouts]
    assert unacked == 0 or any(warned), (sent, received, warned)

    # weights: every published version reached both servers
    for s in steps:
        assert s["publish_acked"] == len(rollouts) and s["publish_timed_out"] == 0, s
        assert s["publish_rerouted"] == 0, s
    weights_mb = sum(f.stat().st_size for f in model.glob("*.safetensors")) / 1e6
    assert all(0.5 * weights_mb < s["publish_mb"] < 1.5 * weights_mb for s in steps), steps
    for proc in rollouts:
        log = proc.text()
        for version in range(1, STEPS + 1):
            assert f"weights: version {version} applied" in log, proc.tail()
    # the strangers: refused, and logged with their address by the learner
    refusals = [line for line in learner.text().splitlines() if "refused a message from" in line]
    assert len(refusals) >= 2 and all("tcp://127.0.0.1:" in r for r in refusals), refusals
    assert elapsed < 300, f"took {elapsed:.0f} s"
