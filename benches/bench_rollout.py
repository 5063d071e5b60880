"""Rollout throughput, side by side in one run: the asynchronous dispatcher vs the `--sync`
reference loop (`run_service(..., sync=True)`), on the same vLLM engine (ONE engine, started
once), the same tiny model, the same BabyAI env servers with an injected long-tailed step
latency (log-normal, `--step-latency-ms 40 --step-latency-sigma 1.0`) and the same settings, each
for the same number of groups. A `GroupReceiver` thread drains the groups as the learner;
`max_staleness` is large so admission is not the limit without a learner stepping versions.

Prints episodes/s, generated tokens/s and the engine idle ratio (wall-time-weighted over the
snapshots in `<log_dir>/metrics.jsonl`) per mode, and the async/sync ratio. Targets: async/sync
>= 2.5x episodes/s, async engine idle ratio < 10%.

The tiny model's weights are random, so on its own it would almost never write a parseable
`Action:` line and episodes would never step the env. The engine here is a plain `VllmEngine`
whose `EngineOptions.sampling_args` add a vLLM structured-output regex to every request: each turn is
`Thought: <sampled words>` then `Action: <a BabyAI action>`, sampled by the model (real tokens,
real logprobs) inside the grammar, so every turn steps the env (the injected latency is paid on
every turn). Episodes run to the turn cap (6) unless BabyAI ends them, or end "truncated" when
the long BabyAI prompt (the tiny 320-token vocabulary spells it out) fills the context.

    python benches/bench_rollout.py [--quick] [--groups N] [--group-size 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ACTIONS = ["turn left", "turn right", "move forward", "go to", "pick up", "toggle"]
WORDS = "go to the red blue green grey ball box key door open pick up left right forward".split()
ACTION_REGEX = r"Thought: [a-z]{1,8}( [a-z]{1,8}){0,3}\nAction: (turn left|turn right|move forward)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(latency_ms: float, sigma: float) -> tuple[subprocess.Popen[bytes], int]:
    http = free_port()
    cmd = [sys.executable, "-m", "agentgym_envs.server", "babyai", "--port", str(http)]
    cmd += ["--step-latency-ms", str(latency_ms), "--step-latency-sigma", str(sigma)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=1).read()
            return proc, http
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("babyai server did not start") from None
            time.sleep(0.05)


def corpus(seed: int = 0, lines: int = 400) -> list[str]:
    """Tokenizer training text: BabyAI-like words, action lines and the BabyAI system prompt
    (so prompts and observations take realistic token counts, not one token per letter)."""
    from agentgym_rl.config import ActionFormat
    from agentgym_rl.episode.prompts import system_prompt

    rng = random.Random(seed)
    out = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) for _ in range(lines)]
    out += [f"Thought: {rng.choice(WORDS)}\nAction: {a}" for a in ACTIONS for _ in range(20)]
    out += [system_prompt("babyai", ActionFormat.REACT)] * 20
    return out


def action_sampling_args() -> dict[str, Any]:
    """Every turn follows `ACTION_REGEX` (structured outputs); see the module docstring."""
    from vllm.sampling_params import StructuredOutputsParams

    return {"structured_outputs": StructuredOutputsParams(regex=ACTION_REGEX)}


class Learner:
    """Drains groups from a `GroupReceiver` in a thread, counting them."""

    def __init__(self, endpoint: str) -> None:
        from agentgym_rl import _core

        self.receiver = _core.GroupReceiver(endpoint)
        self.groups = 0
        self.samples = 0
        self.statuses: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        from agentgym_rl import _core

        while not self._stop.is_set():
            got = self.receiver.recv(timeout_s=0.1)
            if got is None:
                continue
            group = _core.decode_group(got[1])
            self.groups += 1
            for s in group.samples:
                self.samples += 1
                self.statuses[s.status] = self.statuses.get(s.status, 0) + 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.receiver.close()


def idle_ratio(path: Path) -> float:
    """Wall-time-weighted engine idle ratio over every snapshot of a run."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    prev, busy_idle, total = 0.0, 0.0, 0.0
    for r in records:
        dt = max(0.0, r["uptime_s"] - prev)
        prev = r["uptime_s"]
        busy_idle += dt * r["engine_idle_ratio"]
        total += dt
    return busy_idle / total if total else float("nan")


async def run_mode(
    engine: Any, model: Path, address: list[str], args: argparse.Namespace, sync: bool, log: Path
) -> dict[str, Any]:
    from agentgym_rl.config import load_rollout_config
    from agentgym_rl.rollout.service import run_service

    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config = load_rollout_config(
        ROOT / "configs" / "rollout" / "babyai_tiny.yaml",
        [
            f"model={model}",
            f"envs.0.addresses={json.dumps(address)}",
            "envs.0.max_inflight=256",
            f"learner.endpoints=['{endpoint}']",
            f"log_dir={log}",
            f"dataset.split={ROOT / 'envs/agentgym_envs/babyai/data/train.json'}",
            f"dataset.group_size={args.group_size}",
            "engine.max_model_len=2048",
            f"engine.max_tokens_per_turn={args.max_tokens}",
            f"scaling_inter.stages=[{args.turns}]",
            f"buffer.groups_per_step={args.groups_per_step}",
            "buffer.max_staleness=1000000",
            f"buffer.max_in_flight={args.max_in_flight}",
            "buffer.max_ready=256",
            "status_interval_s=0.5",
        ],
    )
    learner = Learner(endpoint)
    try:
        t0 = time.perf_counter()
        summary = await run_service(config, engine, sync=sync, quiet=True, max_groups=args.groups)
        wall = time.perf_counter() - t0
    finally:
        deadline = time.monotonic() + 10
        while learner.groups < args.groups and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        learner.close()
    last = json.loads((log / "metrics.jsonl").read_text().splitlines()[-1])
    return {
        "mode": "sync" if sync else "async",
        "groups": summary.groups_sent,
        "received": learner.groups,
        "episodes": summary.episodes,
        "wall_s": wall,
        "episodes_per_s": summary.episodes / wall,
        "tokens_per_s": last["generated_tokens"] / wall,
        "env_steps_per_s": last["env_steps"] / wall,
        "turns_mean": last["turns_mean"],
        "idle": idle_ratio(log / "metrics.jsonl"),
        "statuses": learner.statuses,
    }


async def main_async(args: argparse.Namespace) -> int:
    from agentgym_rl.model import create_tiny_model
    from agentgym_rl.rollout.engine import EngineOptions, VllmEngine

    procs = [start_server(args.latency_ms, args.sigma) for _ in range(args.servers)]
    addresses = [f"http://127.0.0.1:{port}" for _, port in procs]
    engine = None
    try:
        with tempfile.TemporaryDirectory(prefix="bench-rollout-") as tmp:
            model = create_tiny_model(
                Path(tmp) / "model", corpus=corpus(), vocab_size=1024, hidden=128, head_dim=64
            )
            # float32 like the checkpoint: "auto" would run the CPU build in bf16.
            opts = EngineOptions(
                max_model_len=2048,
                max_num_seqs=256,
                temperature=1.0,
                seed=0,
                dtype="float32",
                sampling_args=action_sampling_args(),
            )
            t0 = time.perf_counter()
            engine = await VllmEngine.start(model, opts)
            print(f"engine started in {time.perf_counter() - t0:.1f}s", flush=True)
            # Warm-up: compile the grammar path and the first batch shapes (not measured).
            await asyncio.gather(
                *(engine.generate([1, 5, 7], max_tokens=16, request_id=f"w{i}") for i in range(8))
            )
            results = []
            for sync in (False, True):
                log = Path(tmp) / ("sync" if sync else "async")
                r = await run_mode(engine, model, addresses, args, sync, log)
                results.append(r)
                print(
                    f"{r['mode']:>5}: {r['groups']} groups ({r['received']} received), "
                    f"{r['episodes']} episodes in {r['wall_s']:.1f}s: "
                    f"{r['episodes_per_s']:.2f} episodes/s, {r['tokens_per_s']:.0f} tokens/s, "
                    f"{r['env_steps_per_s']:.1f} env steps/s, turns {r['turns_mean']:.1f}, "
                    f"engine idle {r['idle']:.1%}, statuses {r['statuses']}",
                    flush=True,
                )
    finally:
        if engine is not None:
            engine.shutdown()
        for proc, _ in procs:
            proc.terminate()
            proc.wait(timeout=10)
    a, s = results
    ratio = a["episodes_per_s"] / s["episodes_per_s"]
    tok_ratio = a["tokens_per_s"] / s["tokens_per_s"]
    print(
        f"async/sync: {ratio:.2f}x episodes/s, {tok_ratio:.2f}x tokens/s "
        f"(target >= 2.5x); engine idle async {a['idle']:.1%} (target < 10%), "
        f"sync {s['idle']:.1%}"
    )
    ok = a["groups"] == s["groups"] == args.groups
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="CI smoke: few groups")
    p.add_argument("--groups", type=int, default=None, help="groups per mode (default 48)")
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--groups-per-step", type=int, default=4, help="sync batch, in groups")
    p.add_argument("--max-in-flight", type=int, default=16, help="async groups at once")
    p.add_argument("--turns", type=int, default=6, help="turn cap")
    p.add_argument("--max-tokens", type=int, default=64, help="max tokens per turn")
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--latency-ms", type=float, default=40.0)
    p.add_argument("--sigma", type=float, default=1.0)
    args = p.parse_args()
    if args.groups is None:
        args.groups = 8 if args.quick else 48
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
