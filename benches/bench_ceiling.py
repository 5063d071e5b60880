"""The rollout loop against the engine's own ceiling, side by side in one run: same model, same
turns, same sampling.

1. Our rollout server (`run_service`, the loop `serve-rollouts` runs, with a `GroupReceiver`
   thread as the learner) plays BabyAI episodes on real env servers with no injected latency
   (over ZeroMQ), logging every episode, once per `--max-in-flight` (groups at once, or `auto`:
   sized by the server from what it measures, as `buffer.in_flight: auto`). The engine's KV
   cache is the one `serve-rollouts` sizes for the largest setting (`inference/kv_cache.py`).
2. The turns it played, each turn's exact prompt ids and its generated length (`turn_spans` in
   the episode log), generated again all at once (`ignore_eos`, so the same token counts):
   - by the same engine (one `AsyncLLM` behind `VllmEngine`), every request submitted together,
     its prefix cache dropped first;
   - by vLLM's offline `LLM.generate` in its own engine with the same settings (full form only):
     the ceiling. In the quick form the same engine's all-at-once row stands in for it.

Prints, per setting, generated tokens, wall seconds and generated tokens/s, and the rollout
server's share of the ceiling (target >= 0.9), its mean requests in the engine and episodes alive
(the rest of its slots are finished episodes waiting on their group). The gap has two parts the
rows separate: the engine client (offline engine vs the same `AsyncLLM` all at once) and our loop
(all at once vs episodes whose turns wait for their previous turn, the env and the loop's own
work).

Full form: the policy bench_rollout.py picks (the README run's final export, else its base
policy, else a created one), its train config's settings, 256 groups of 4 per setting, in flight
16 (the shipped configs) and auto (up to 64). Quick form (`--quick`, CI): the tiny random model,
8 groups of 4, turn cap 4, 32 tokens a turn, in flight 8.

    python benches/bench_ceiling.py [--quick] [--model PATH] [--groups 256] [--max-in-flight 16 auto]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
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
)
from figures import figure


@dataclass(frozen=True)
class Turn:
    """One generated turn of a logged episode: the ids the engine was given, how many it made."""

    prompt: list[int]
    generated: int


@dataclass(frozen=True)
class Row:
    name: str
    tokens: int
    wall_s: float
    in_engine: float | None = None
    """The rollout server's mean requests in the engine (its metrics' time integral / wall)."""
    alive: float | None = None
    """The rollout server's mean episodes alive (playing, not yet waiting on their group)."""
    cpu: dict[str, float] | None = None
    """CPU seconds over the row's wall time, by who: the engine's processes, this one (our loop
    and vLLM's client), the env servers."""

    @property
    def rate(self) -> float:
        return self.tokens / self.wall_s


class CpuClock:
    """CPU seconds used by this process, its engine's processes and the env servers."""

    def __init__(self, env_pids: list[int]) -> None:
        import psutil

        me = psutil.Process()
        self.groups = {
            "engine": [c for c in me.children(recursive=True) if c.pid not in env_pids],
            "this process": [me],
            "env servers": [psutil.Process(pid) for pid in env_pids],
        }
        self._start = self._read()

    def _read(self) -> dict[str, float]:
        return {
            who: sum(sum(p.cpu_times()[:2]) for p in procs if p.is_running())
            for who, procs in self.groups.items()
        }

    def used(self) -> dict[str, float]:
        return {who: t - self._start[who] for who, t in self._read().items()}


def played_turns(episodes: Path) -> list[Turn]:
    """Every generated turn of the episodes logged in `episodes` (an `episodes.jsonl`)."""
    turns = []
    for line in episodes.read_text().splitlines():
        record = json.loads(line)
        ids = record["input_ids"]
        turns += [Turn(ids[:start], end - start) for start, end in record["turn_spans"]]
    return turns


async def serve(
    engine: Any, setup: Setup, args: argparse.Namespace, in_flight: str, log: Path
) -> Row:
    """Our rollout loop, `args.groups` groups at `in_flight` groups at once ("auto": sized by
    the server up to `args.auto_cap`), every episode logged."""
    from agentgym_rl.rollout.service import run_service

    servers = [EnvServerProcess("babyai", python=sys.executable) for _ in range(args.servers)]
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    try:
        for server in servers:
            server.start(*setup.server_args, timeout_s=60)
        config = mode_config(setup, [s.zmq for s in servers], args, log, endpoint, in_flight)
        config = config.model_copy(update={"episode_log_every": 1})
        learner = Learner(endpoint)
        try:
            clock = CpuClock([s.pid for s in servers])
            t0 = time.perf_counter()
            await run_service(config, engine, quiet=True, max_groups=args.groups)
            wall = time.perf_counter() - t0
            cpu = clock.used()
        finally:
            learner.close()
    finally:
        for server in servers:
            server.stop()
    tokens = sum(t.generated for t in played_turns(log / "episodes.jsonl"))
    last = json.loads((log / "metrics.jsonl").read_text().splitlines()[-1])
    in_engine = last["request_seconds"] / last["uptime_s"]
    alive = last["episode_seconds"] / last["uptime_s"]
    name = f"rollout server, {in_flight} groups in flight"
    if in_flight == "auto":
        name = f"rollout server, in flight auto (up to {args.auto_cap} groups)"
    return Row(name, tokens, wall, in_engine, alive, cpu)


async def all_at_once(engine: Any, turns: list[Turn]) -> Row:
    """The same engine, every turn submitted together (its prefix cache dropped first)."""
    await engine.drop_prefix_cache()
    clock = CpuClock([])
    t0 = time.perf_counter()
    made = await asyncio.gather(
        *(
            engine.generate(t.prompt, max_tokens=t.generated, request_id=f"c{i}", ignore_eos=True)
            for i, t in enumerate(turns)
        )
    )
    wall = time.perf_counter() - t0
    tokens = sum(len(g.token_ids) for g in made)
    return Row("same engine, every turn at once", tokens, wall, cpu=clock.used())


def offline(model: Path, options: Any, turns: list[Turn]) -> Row:
    """vLLM's offline `LLM.generate` over every turn at once, in its own engine (the ceiling)."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from agentgym_rl.inference.engine import engine_args

    llm = LLM(**engine_args(model, options))  # the served engine's very settings
    try:
        params = [
            SamplingParams(
                temperature=options.temperature,
                top_p=options.top_p,
                max_tokens=t.generated,
                ignore_eos=True,
                logprobs=0,
                detokenize=False,
            )
            for t in turns
        ]
        prompts = [TokensPrompt(prompt_token_ids=t.prompt) for t in turns]
        llm.generate(prompts[:8], params[:8], use_tqdm=False)  # warm-up, like the served engine's
        llm.reset_prefix_cache()
        t0 = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        wall = time.perf_counter() - t0
    finally:
        del llm
        gc.collect()
    return Row(
        "vLLM offline LLM.generate (ceiling)", sum(len(o.outputs[0].token_ids) for o in outs), wall
    )


async def main_async(args: argparse.Namespace) -> int:
    from agentgym_rl.inference.engine import VllmEngine
    from agentgym_rl.inference.kv_cache import sized_options

    t_start = time.perf_counter()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min)", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as name:
        tmp = Path(name)
        setup = quick_setup(tmp, args) if args.quick else policy_setup(tmp, args)
        setup.sampling_args.clear()  # no output constraint: the replay must sample as served
        config = mode_config(setup, ["tcp://127.0.0.1:1"], args, tmp, "tcp://127.0.0.1:1")
        # the KV cache `serve-rollouts` would size for the largest setting's episodes
        caps = [args.auto_cap if s == "auto" else int(s) for s in args.settings]
        episodes = max(caps) * args.group_size
        engine_config = config.engine.model_copy(update={"kv_cache_mb": args.kv_mb})
        options = sized_options(engine_config, setup.model, episodes, max_num_seqs=256)
        if options.kv_cache_memory_bytes is not None:
            mib = options.kv_cache_memory_bytes >> 20
            print(f"engine KV cache: {mib} MiB ({episodes} episodes at once)", flush=True)
        engine = await VllmEngine.start(setup.model, options)
        served: list[tuple[Row, list[Turn], Row]] = []
        try:
            await asyncio.gather(
                *(engine.generate([1, 5, 7], max_tokens=16, request_id=f"w{i}") for i in range(8))
            )
            for in_flight in args.settings:
                log = tmp / f"in-flight-{in_flight}"
                row = await serve(engine, setup, args, in_flight, log)
                turns = played_turns(log / "episodes.jsonl")
                served.append((row, turns, await all_at_once(engine, turns)))
                print(f"{row.name}: {len(turns)} turns, {row.tokens} tokens", flush=True)
        finally:
            engine.shutdown()
        ceilings = [
            offline(setup.model, engine.options, turns) if not args.quick else together
            for _, turns, together in served
        ]
    print(
        "\n| setting | generated tokens | wall s | tokens/s | of the ceiling | in the engine "
        "| episodes alive |"
    )
    print("|---|---|---|---|---|---|---|")
    for (row, _, together), ceiling in zip(served, ceilings, strict=True):
        shown = [ceiling] if ceiling is together else [ceiling, together]
        for r in [*shown, row]:
            print(
                f"| {r.name} | {r.tokens} | {r.wall_s:.1f} | {r.rate:.0f} | "
                f"{r.rate / ceiling.rate:.2f} | "
                f"{'all' if r.in_engine is None else f'{r.in_engine:.0f} on average'} | "
                f"{'' if r.alive is None else f'{r.alive:.0f} on average'} |"
            )
        for r in (together, row):
            assert r.cpu is not None
            cores = {who: t / r.wall_s for who, t in r.cpu.items()}
            print(
                f"  {r.name}: cores busy on average: "
                + ", ".join(f"{who} {n:.2f}" for who, n in cores.items())
                + f" (of {os.cpu_count()})"
            )
        figure(
            "ceiling", f"generated tokens/s, {row.name}", row.rate, "tokens/s",
            ceiling=ceiling.rate, ceiling_name=ceiling.name, target=">= 0.9 of the ceiling",
        )  # fmt: skip
    print(
        f"load average at end: {os.getloadavg()[0]:.2f} (1 min); "
        f"bench wall time {time.perf_counter() - t_start:.0f}s"
    )
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="CI smoke: tiny random model, 8 groups")
    p.add_argument("--model", type=Path, default=None, help="HF checkpoint (full form)")
    p.add_argument("--warmup-steps", type=int, default=200, help="of a policy the bench creates")
    p.add_argument("--groups", type=int, default=None, help="groups per setting (256; quick 8)")
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument(
        "--max-in-flight", nargs="+", default=None, help="groups at once, or auto (16 auto)"
    )
    p.add_argument("--auto-cap", type=int, default=64, help="most groups in flight when auto")
    p.add_argument("--turns", type=int, default=None, help="turn cap (quick 4, full: config's)")
    p.add_argument("--max-tokens", type=int, default=None, help="per turn (quick 32)")
    p.add_argument("--servers", type=int, default=2)
    p.add_argument(
        "--kv-mb", type=int, default=None, help="engine KV cache, MiB (default: as serve-rollouts)"
    )
    add_policy_arguments(p)
    args = p.parse_args()
    args.groups = args.groups or (8 if args.quick else 256)
    args.settings = args.max_in_flight or (["8"] if args.quick else ["16", "auto"])
    args.max_in_flight = 16  # the engine options' placeholder config reads it
    if args.quick:
        args.turns, args.max_tokens = args.turns or 4, args.max_tokens or 32
    args.groups_per_step = 4  # read by mode_config; the sync batch, unused here
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
