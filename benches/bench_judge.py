"""What a judge costs the rollout loop, side by side in one run: the same policy on the same vLLM
engine (ONE engine, started once) and the same BabyAI env servers (step latency 40 ms median,
log-normal), for the same number of groups, with rewards from the env alone and then from
`env+judge` (`rollout.envs[].reward`), the judge asked per episode and per group.

Prints per mode episodes/s, the seconds one learner step's worth of groups takes
(`--groups-per-step` x `--group-size` episodes) and the judge's share of it (the time it adds
over the env-only mode), the judge's calls, and its prompt and completion tokens per episode;
then the ratios.

Full form (default): the policy of bench_rollout.py (the README run's final HF export, else its
base) under its train config's settings, and a model judge: `--judge DIR`, a local HF folder
served by vLLM's OpenAI server in its own process (default runs/models/smollm2-135m-instruct:
`agentgym-rl init-model --base smollm2-135m-instruct --warmup-steps 0 --out DIR` makes it);
12 groups of 4 per mode. Quick form (`--quick`, CI): bench_rollout's tiny random policy with
regex-held turns and the scripted oracle judge of the tests (tests/scripted_judge.py) served by
uvicorn through the same OpenAI path, 6 groups: a smoke figure of the plumbing's overhead.

    python benches/bench_judge.py [--quick] [--model PATH] [--judge DIR] [--groups 24]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.processes.ports import free_port
from bench_rollout import (
    Learner,
    Setup,
    add_policy_arguments,
    mode_config,
    policy_setup,
    quick_setup,
    start_engine,
)
from figures import figure

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted judge and its server (quick form)
from asgi_procs import AsgiProc  # noqa: E402

DEFAULT_JUDGE = ROOT / "runs" / "models" / "smollm2-135m-instruct"
LATENCY = ["--step-latency-ms", "40", "--step-latency-sigma", "1.0"]


async def run_mode(
    engine: Any, setup: Setup, args: argparse.Namespace, log: Path, reward: dict[str, Any] | None
) -> dict[str, Any]:
    from agentgym_rl.judging.serving import judges_for
    from agentgym_rl.rollout.service import run_service

    if reward is not None:
        setup = dataclasses.replace(
            setup, overrides=[*setup.overrides, f"envs.0.reward={json.dumps(reward)}"]
        )
    servers = [EnvServerProcess("babyai", python=sys.executable) for _ in range(2)]
    try:
        for server in servers:
            server.start(*LATENCY, *setup.server_args, timeout_s=60)
        endpoint = f"tcp://127.0.0.1:{free_port()}"
        config = mode_config(setup, [s.http for s in servers], args, log, endpoint)
        learner = Learner(endpoint)
        try:
            # the judge's server starts before the clock does: its start is a run's, not a step's
            async with judges_for(config.envs, log) as judges:
                t0 = time.perf_counter()
                summary = await run_service(
                    config, engine, quiet=True, max_groups=args.groups, judges=judges
                )
                wall = time.perf_counter() - t0
                counters = next(iter(judges.values())).counters.snapshot() if judges else {}
        finally:
            learner.close()
    finally:
        for server in servers:
            server.stop()
    episodes = max(1, summary.episodes)
    step_episodes = args.groups_per_step * args.group_size
    return {
        "groups": summary.groups_sent,
        "episodes": summary.episodes,
        "wall_s": wall,
        "episodes_per_s": summary.episodes / wall,
        "step_s": wall / episodes * step_episodes,
        "calls": counters.get("judge_calls", 0),
        "failed_groups": counters.get("judge_failed_groups", 0),
        "prompt_tokens": counters.get("judge_prompt_tokens", 0) / episodes,
        "completion_tokens": counters.get("judge_completion_tokens", 0) / episodes,
    }


def judge_settings(args: argparse.Namespace, url: str | None) -> dict[str, Any]:
    if url is not None:
        return {"model": "oracle", "url": url}
    return {"model": str(args.judge), "max_model_len": 4096, "max_in_flight": 8}


async def main_async(args: argparse.Namespace) -> int:
    t_start = time.perf_counter()
    oracle = AsgiProc("scripted_judge:app", ready_path="/health").start() if args.quick else None
    url = f"{oracle.url}/v1" if oracle is not None else None
    engine = None
    rows: list[tuple[str, dict[str, Any]]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-judge-") as name:
            tmp = Path(name)
            setup = quick_setup(tmp, args) if args.quick else policy_setup(tmp, args)
            engine = await start_engine(setup, args, tmp)
            judge = judge_settings(args, url)
            modes: list[tuple[str, dict[str, Any] | None]] = [("env", None)]
            modes += [
                (f"env+judge, {m}", {"source": "env+judge", "judge": {**judge, "mode": m}})
                for m in ("episode", "group")
            ]
            for mode, reward in modes:
                r = await run_mode(engine, setup, args, tmp / mode.replace(" ", ""), reward)
                rows.append((mode, r))
                print(
                    f"{mode}: {r['groups']} groups, {r['episodes']} episodes in "
                    f"{r['wall_s']:.1f}s: {r['episodes_per_s']:.2f} episodes/s, "
                    f"{r['step_s']:.1f}s a step; judge calls {r['calls']}, "
                    f"{r['prompt_tokens']:.0f} prompt + {r['completion_tokens']:.1f} completion "
                    f"tokens an episode",
                    flush=True,
                )
    finally:
        if engine is not None:
            engine.shutdown()
        if oracle is not None:
            oracle.stop()
    base = rows[0][1]
    which = "the scripted oracle (quick)" if args.quick else str(args.judge)
    print(f"\njudge: {which}; a step: {args.groups_per_step} groups of {args.group_size}")
    print(
        "| rewards | episodes/s | x env | s a step | judge share of a step | judge tokens/episode |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for mode, r in rows:
        share = max(0.0, 1 - base["step_s"] / r["step_s"])
        tokens = r["prompt_tokens"] + r["completion_tokens"]
        print(
            f"| {mode} | {r['episodes_per_s']:.2f} | {r['episodes_per_s'] / base['episodes_per_s']:.2f}x"
            f" | {r['step_s']:.1f} | {share:.0%} | {tokens:.0f} |"
        )
    for mode, r in rows[1:]:
        figure(
            "judge", f"episodes with {mode}", r["episodes_per_s"], "episodes/s",
            baseline=base["episodes_per_s"], baseline_name="env rewards alone",
        )  # fmt: skip
    print(f"bench wall time {time.perf_counter() - t_start:.0f}s")
    ok = all(r["groups"] == args.groups and r["failed_groups"] == 0 for _, r in rows)
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="CI smoke: tiny policy, scripted judge")
    p.add_argument("--model", type=Path, default=None, help="the policy (HF folder; full form)")
    p.add_argument("--judge", type=Path, default=DEFAULT_JUDGE, help="the judge (full form)")
    p.add_argument("--warmup-steps", type=int, default=200, help="of a policy the bench creates")
    p.add_argument("--groups", type=int, default=None, help="groups per mode (quick 6, full 12)")
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--groups-per-step", type=int, default=4, help="a learner step, in groups")
    add_policy_arguments(p)
    args = p.parse_args()
    args.groups = args.groups or (6 if args.quick else 12)
    args.turns = args.max_tokens = None
    args.max_in_flight = 16
    if not args.quick and not (args.judge / "config.json").is_file():
        p.error(
            f"no judge model in {args.judge}: make it with `agentgym-rl init-model --base "
            f"smollm2-135m-instruct --warmup-steps 0 --out {args.judge}`, or pass --judge DIR"
        )
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
