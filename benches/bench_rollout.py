"""Rollout throughput, side by side in one run: the asynchronous dispatcher vs the `--sync`
reference loop (`run_service(..., sync=True)`), on the same vLLM engine (ONE engine, started
once), the same policy, the same BabyAI env servers with an injected long-tailed step latency
(log-normal, median `--latency-ms`, `--sigma 1.0`) and the same settings, each for a given
number of groups. A `GroupReceiver` thread drains the groups as the learner; `max_staleness` is
large and the zero-variance filter is off, so neither admission nor filtering is the limit
without a learner stepping versions.

Prints per mode episodes/s, generated tokens/s, the engine idle share (wall-time-weighted over
the snapshots in `<log_dir>/metrics.jsonl`: the whole run, and its steady state, up to the
dispatch of the last group, apart from the drain after it), the steady state's episodes/s and
the episodes' success rate, then the async/sync ratios, for each latency, and a table. Async runs
once per `--in-flight` setting: a fixed number of groups, or `auto` (`buffer.in_flight: auto`,
sized by the server from what it measures, up to `--auto-cap`); the last setting is the
headline. Targets: async/sync >= 4x at 40 ms and >= 8x at 500 ms, engine idle in the steady
state < 10% at 40 ms and < 20% at 500 ms.

Full form (default): a trained policy, no output constraint. The model is `--model PATH`, else
the README run's final HF export (the newest complete `<run_dir>/checkpoints/step_<n>/hf` of
configs/train/babyai_goto.yaml), else that run's base policy (its `model`, made by
`init-model`), else one the bench creates once with that config's `init_model` options and
`--warmup-steps` format warm-up steps, cached under runs/bench/ (the output says which). Every
setting the policy learned under is the train config's own: compact observations (its env
servers' `--env-option`), the react format and its system prompt, temperature 0.7, 24 tokens a
turn, context 2048, turn cap 5. Async at 16 groups in flight and at auto (up to 64); 40 ms: 96
groups of 4 per run, 500 ms: 160 per async run and 40 for sync (under one episode a second:
40 groups measure its rate, which is the same batch after batch).

Quick form (`--quick`, CI): a tiny random model made here, whose every turn a vLLM
structured-output regex (`EngineOptions.sampling_args`) holds to `Thought: <sampled words>` then
`Action: <a BabyAI action>`, so that every turn steps the env; 8 groups at 40 ms, 16 in flight,
turn cap 6, 64 tokens a turn, on configs/rollout/babyai_tiny.yaml; 8 groups are too few for a
steady state, so its ratio (about 2x) is a smoke figure, not the target's.

Measured (full form, 6.7 minutes with the engine's start, 2 CPU cores, nothing else running,
the README run's step-60 export):

    latency  in flight    episodes/s (x sync)      steady state        engine idle, steady
    40 ms    16           23.35 (3.06x)            24.18/s (3.17x)     0.4%
    40 ms    auto (64)    22.40 (2.94x)            18.65/s (2.45x)     0.6%
    40 ms    sync          7.62                                        61.6%
    500 ms   16           10.85 (12.2x)            11.84/s (13.3x)     12.9%
    500 ms   auto (64)    18.91 (21.2x)            21.83/s (24.5x)     0.1%
    500 ms   sync          0.89                                        95.1%

At 500 ms the engine waits on env steps unless enough episodes run: auto sizes to the cap and
keeps it busy. At 40 ms the async engine is already busy 99.4% of its steady state, so more
episodes in flight cannot help and the ratio is bounded by how idle the sync loop leaves its
engine (61.6%): 4x is out of reach for one engine on 2 cores (auto's steady window is short
here: 64 of the 96 groups start at once).

    python benches/bench_rollout.py [--quick] [--model PATH] [--latency-ms 40 500]
        [--groups 96 160] [--sync-groups 96 40] [--in-flight 16 auto] [--group-size 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.processes.ports import free_port
from figures import figure

ROOT = Path(__file__).resolve().parents[1]
TRAIN_CONFIG = ROOT / "configs" / "train" / "babyai_goto.yaml"
QUICK_CONFIG = ROOT / "configs" / "rollout" / "babyai_tiny.yaml"
CREATED_MODELS = ROOT / "runs" / "bench"
ACTIONS = ["turn left", "turn right", "move forward", "go to", "pick up", "toggle"]
WORDS = "go to the red blue green grey ball box key door open pick up left right forward".split()
ACTION_REGEX = r"Thought: [a-z]{1,8}( [a-z]{1,8}){0,3}\nAction: (turn left|turn right|move forward)"


@dataclass
class Setup:
    """What both modes share: the policy, the rollout settings it runs under (a YAML file plus
    overrides) and the options of its env servers."""

    model: Path
    config: Path
    overrides: list[str]
    server_args: list[str] = field(default_factory=list)
    sampling_args: dict[str, Any] = field(default_factory=dict)


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


def quick_setup(tmp: Path, args: argparse.Namespace) -> Setup:
    """The tiny random model, every turn held to `ACTION_REGEX` (see the module docstring)."""
    from vllm.sampling_params import StructuredOutputsParams

    from agentgym_rl.policy_creation import create_tiny_model

    model = create_tiny_model(
        tmp / "model", corpus=corpus(), vocab_size=1024, hidden=128, head_dim=64
    )
    overrides = [
        f"dataset.split={ROOT / 'envs/agentgym_envs/babyai/data/train.json'}",
        "engine.max_model_len=2048",
        f"engine.max_tokens_per_turn={args.max_tokens or 64}",
        f"scaling_inter.turn_caps=[{args.turns or 6}]",
    ]
    regex = {"structured_outputs": StructuredOutputsParams(regex=ACTION_REGEX)}
    return Setup(model, QUICK_CONFIG, overrides, sampling_args=regex)


def policy_setup(tmp: Path, args: argparse.Namespace) -> Setup:
    """A trained policy under the settings of the train config that made it: its `rollout`
    section (prompt, format, sampling, turn cap, split) and its env servers' options."""
    import yaml

    from agentgym_rl.config.loader import load_config
    from agentgym_rl.config.train import TrainConfig

    train = load_config(TrainConfig, args.config)
    model = choose_policy(train, args)
    rollout = train.rollout.model_dump(mode="json", exclude={"eval"}, exclude_unset=True)
    config = tmp / "policy_rollout.yaml"
    config.write_text(yaml.safe_dump(rollout))
    overrides = []
    if args.max_tokens:
        overrides.append(f"engine.max_tokens_per_turn={args.max_tokens}")
    if args.turns:
        overrides.append(f"scaling_inter.turn_caps=[{args.turns}]")
    if args.dtype:
        overrides.append(f"engine.dtype={args.dtype}")
    servers = [a for s in train.env_servers if s.env == "babyai" for a in s.args]
    return Setup(model, config, overrides, server_args=servers)


def choose_policy(train: Any, args: argparse.Namespace) -> Path:
    """`--model`, else the run's final HF export, else its base policy, else a created one."""
    from agentgym_rl.learner.checkpoint_dirs import complete_checkpoints

    if args.model is not None:
        print(f"policy: {args.model} (--model)", flush=True)
        return Path(args.model)
    run_dir = train.run_dir if train.run_dir.is_absolute() else ROOT / train.run_dir
    steps = [
        (step, p)
        for step, p in complete_checkpoints(run_dir / "checkpoints")
        if (p / "hf" / "config.json").is_file()
    ]
    if steps:
        step, path = max(steps)
        print(f"policy: {path / 'hf'} (the trained run {run_dir.name}, step {step})", flush=True)
        return path / "hf"
    base = train.model if train.model.is_absolute() else ROOT / train.model
    if (base / "config.json").is_file():
        print(
            f"policy: {base} (no trained checkpoint in {run_dir}: the run's base policy, "
            "format warm-up only)",
            flush=True,
        )
        return base
    return created_policy(train, args.config, args.warmup_steps)


def created_policy(train: Any, config: Path, warmup_steps: int) -> Path:
    """`init-model` with the train config's options but `warmup_steps`, made once and cached."""
    out = CREATED_MODELS / f"{config.stem.replace('_', '-')}-warmup{warmup_steps}"
    if (out / "init_model.json").is_file():
        print(f"policy: {out} (created by an earlier bench run: format warm-up only)", flush=True)
        return out
    from agentgym_rl.config.flags import to_flags
    from agentgym_rl.config.init_model import InitModelSettings

    given = train.init_model.model_dump(exclude_unset=True) if train.init_model else {}
    options = InitModelSettings.model_validate({**given, "warmup_steps": warmup_steps})
    cmd = [sys.executable, "-m", "agentgym_rl.cli", "init-model", "--out", str(out), "--force"]
    cmd += to_flags(options)  # as `train` passes them (supervise/plan.py)
    print(
        f"policy: none trained ({config.name} has no checkpoint yet); creating {out} "
        f"with init-model ({warmup_steps} warm-up steps, cached for later runs)",
        flush=True,
    )
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    print(f"policy created in {time.perf_counter() - t0:.0f}s", flush=True)
    return out


def add_policy_arguments(p: argparse.ArgumentParser) -> None:
    """The full form's policy settings, shared with bench_ceiling.py."""
    p.add_argument(
        "--config",
        type=Path,
        default=TRAIN_CONFIG,
        help="the train config whose rollout settings the policy plays under (full form; "
        "default: the README run's)",
    )
    p.add_argument(
        "--dtype", default=None, help="engine dtype instead of the config's (e.g. float32)"
    )


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


def idle_ratio(path: Path, groups: int | None = None) -> tuple[float, float]:
    """Wall-time-weighted engine idle ratio over a run's snapshots: (the whole run, its steady
    state). The steady state runs from the first snapshot with generated tokens to the one in
    which the last of `groups` was dispatched; after it, the drain: the last episodes finish with
    nothing new to start (the whole run's figure without `groups`)."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    prev, spans = 0.0, []
    for r in records:
        dt = max(0.0, r["uptime_s"] - prev)
        prev = r["uptime_s"]
        started = r.get("generated_tokens", 0) > 0
        dispatched = groups is not None and r.get("buffer", {}).get("admitted", 0) >= groups
        spans.append((dt, r["engine_idle_ratio"], started, dispatched))

    def share(rows: list[tuple[float, float, bool, bool]]) -> float:
        total = sum(dt for dt, *_ in rows)
        return sum(dt * idle for dt, idle, *_ in rows) / total if total else float("nan")

    steady, seen_last = [], False
    for row in spans:
        if row[2] and not seen_last:
            steady.append(row)
        seen_last = seen_last or row[3]
    return share(spans), share(steady) if groups is not None else share(spans)


def steady_episodes_per_s(path: Path, groups: int) -> float:
    """Episodes finished per second over the steady state `idle_ratio` names (from the snapshot
    before the first generated tokens to the one in which the last of `groups` was dispatched):
    the rate a long run keeps, apart from the start and the drain of a short one. NaN where no
    episode finished inside that window (the quick form dispatches every group at once): a rate
    of zero there would read as a stalled engine."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    prev: dict[str, Any] = {"uptime_s": 0.0, "episodes": 0}
    start: dict[str, Any] | None = None
    end = prev
    for r in records:
        if start is None and r.get("generated_tokens", 0) > 0:
            start = prev
        if start is not None:
            end = r
        if r.get("buffer", {}).get("admitted", 0) >= groups:
            break
        prev = r
    if (
        start is None
        or end["uptime_s"] <= start["uptime_s"]
        or end["episodes"] == start["episodes"]
    ):
        return float("nan")
    return (end["episodes"] - start["episodes"]) / (end["uptime_s"] - start["uptime_s"])


def mode_config(
    setup: Setup,
    address: list[str],
    args: argparse.Namespace,
    log: Path,
    endpoint: str,
    in_flight: str | int | None = None,
) -> Any:
    """The rollout config of one mode; `in_flight`: a fixed cap in groups, or "auto" (sized by
    the server up to `args.auto_cap`); None: `args.max_in_flight`, fixed."""
    from agentgym_rl.config import load_rollout_config

    if in_flight == "auto":
        cap, sizing = getattr(args, "auto_cap", 64), "auto"
    else:
        cap, sizing = int(in_flight or args.max_in_flight), "fixed"

    return load_rollout_config(
        setup.config,
        [
            *setup.overrides,
            f"model={setup.model}",
            f"envs.0.addresses={json.dumps(address)}",
            "envs.0.max_inflight=256",
            f"learner.endpoints=['{endpoint}']",
            f"log_dir={log}",
            f"dataset.group_size={args.group_size}",
            f"buffer.groups_per_step={args.groups_per_step}",
            "buffer.max_staleness=1000000",
            f"buffer.max_in_flight={cap}",
            f"buffer.in_flight={sizing}",
            "buffer.max_ready=256",
            "buffer.filter_zero_variance=false",
            "status_interval_s=0.5",
        ],
    )


async def run_mode(
    engine: Any,
    setup: Setup,
    address: list[str],
    args: argparse.Namespace,
    groups: int,
    sync: bool,
    log: Path,
    in_flight: str | None = None,
) -> dict[str, Any]:
    from agentgym_rl.rollout.service import run_service

    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config = mode_config(setup, address, args, log, endpoint, in_flight)
    learner = Learner(endpoint)
    try:
        t0 = time.perf_counter()
        summary = await run_service(config, engine, sync=sync, quiet=True, max_groups=groups)
        wall = time.perf_counter() - t0
    finally:
        deadline = time.monotonic() + 10
        while learner.groups < groups and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        learner.close()
    records = [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()]
    last = records[-1]
    caps = [r["max_in_flight"] for r in records if "max_in_flight" in r]
    return {
        "mode": "sync" if sync else f"async, {in_flight or args.max_in_flight} in flight",
        "caps": (min(caps), max(caps)) if caps else None,
        "groups": summary.groups_sent,
        "received": learner.groups,
        "episodes": summary.episodes,
        "wall_s": wall,
        "episodes_per_s": summary.episodes / wall,
        "tokens_per_s": last["generated_tokens"] / wall,
        "env_steps_per_s": last["env_steps"] / wall,
        "turns_mean": last["turns_mean"],
        "success": last["successes"] / max(1, last["episodes"]),
        **dict(
            zip(("idle", "steady_idle"), idle_ratio(log / "metrics.jsonl", groups), strict=True)
        ),
        "steady_episodes_per_s": steady_episodes_per_s(log / "metrics.jsonl", groups),
        "statuses": learner.statuses,
    }


async def run_latency(
    engine: Any,
    setup: Setup,
    args: argparse.Namespace,
    latency_ms: float,
    groups: tuple[int, int],
    tmp: Path,
) -> list[dict[str, Any]]:
    """Both modes against fresh env servers with this injected step latency."""
    print(
        f"\nstep latency {latency_ms:g} ms median (log-normal, sigma {args.sigma:g}), "
        f"groups of {args.group_size}: {groups[0]} per async run, {groups[1]} for sync",
        flush=True,
    )
    results = []
    modes: list[tuple[bool, str | None]] = [(False, x) for x in args.in_flight] + [(True, None)]
    for sync, in_flight in modes:
        # fresh servers per mode: each draws the same (seeded) sequence of step latencies
        latency = ["--step-latency-ms", str(latency_ms), "--step-latency-sigma", str(args.sigma)]
        servers = [EnvServerProcess("babyai", python=sys.executable) for _ in range(args.servers)]
        try:
            for server in servers:
                server.start(*latency, *setup.server_args, timeout_s=60)
            log = tmp / f"{latency_ms:g}ms-{'sync' if sync else f'async-{in_flight}'}"
            addresses = [server.http for server in servers]
            count = groups[1] if sync else groups[0]
            r = await run_mode(engine, setup, addresses, args, count, sync, log, in_flight)
        finally:
            for server in servers:
                server.stop()
        results.append(r)
        print(
            f"{r['mode']:>5}: {r['groups']} groups ({r['received']} received), "
            f"{r['episodes']} episodes in {r['wall_s']:.1f}s: "
            f"{r['episodes_per_s']:.2f} episodes/s, {r['tokens_per_s']:.0f} tokens/s, "
            f"{r['env_steps_per_s']:.1f} env steps/s, turns {r['turns_mean']:.1f}, "
            f"success {r['success']:.2f}, engine idle {r['idle']:.1%} "
            f"(steady state {r['steady_idle']:.1%}), "
            f"statuses {r['statuses']}"
            + (f", in-flight cap {r['caps'][0]}-{r['caps'][1]}" if r["caps"] else ""),
            flush=True,
        )
    *asyncs, s = results
    for a in asyncs:
        steady = a["steady_episodes_per_s"]
        in_steady = (
            f"{steady / s['episodes_per_s']:.2f}x in its steady state ({steady:.2f} episodes/s)"
            if math.isfinite(steady)
            else "no steady state (no episode finished before the last dispatch)"
        )
        print(
            f"{a['mode']}/sync: {a['episodes_per_s'] / s['episodes_per_s']:.2f}x episodes/s "
            f"over the run, {in_steady}; engine idle steady state {a['steady_idle']:.1%}",
            flush=True,
        )
    a = asyncs[-1]  # the headline
    want = {40.0: ">= 4x sync", 500.0: ">= 8x sync"}.get(latency_ms, ">= 2.5x sync")
    if args.quick:  # too few groups for a steady state: a smoke figure
        want = "smoke only (full form: >= 4x at 40 ms)"
    figure(
        "rollout", f"episodes at {latency_ms:g} ms env latency", a["episodes_per_s"], "episodes/s",
        baseline=s["episodes_per_s"], baseline_name="synchronous loop", target=want,
    )  # fmt: skip
    if math.isfinite(a["steady_episodes_per_s"]):
        figure(
            "rollout", f"episodes at {latency_ms:g} ms env latency, steady state",
            a["steady_episodes_per_s"], "episodes/s", baseline=s["episodes_per_s"],
            baseline_name="synchronous loop", target=want,
        )  # fmt: skip
    figure(
        "rollout", f"engine idle at {latency_ms:g} ms env latency, steady state",
        100 * a["steady_idle"], "%", baseline=100 * s["steady_idle"],
        baseline_name="synchronous loop", lower_is_better=True,
        target="< 20% at 500 ms" if latency_ms >= 500 else "< 10%",
    )  # fmt: skip
    print(
        f"async/sync: {a['episodes_per_s'] / s['episodes_per_s']:.2f}x episodes/s, "
        f"{a['tokens_per_s'] / s['tokens_per_s']:.2f}x tokens/s (target {want}); "
        f"engine idle async {a['idle']:.1%}, sync {s['idle']:.1%}",
        flush=True,
    )
    return [a, s]


def print_table(rows: list[tuple[float, dict[str, Any], dict[str, Any]]]) -> None:
    """Both modes and their ratios, one line per latency (the README's table)."""
    print(
        "\n| step latency | episodes/s async / sync | tokens/s async / sync | "
        "engine idle async / sync | success async / sync |"
    )
    print("|---|---|---|---|---|")
    for latency, a, s in rows:
        print(
            f"| {latency:g} ms | {a['episodes_per_s']:.2f} / {s['episodes_per_s']:.2f} "
            f"(**{a['episodes_per_s'] / s['episodes_per_s']:.2f}x**) "
            f"| {a['tokens_per_s']:.0f} / {s['tokens_per_s']:.0f} "
            f"({a['tokens_per_s'] / s['tokens_per_s']:.2f}x) "
            f"| {a['idle']:.1%} / {s['idle']:.1%} (steady {a['steady_idle']:.1%} / "
            f"{s['steady_idle']:.1%}) | {a['success']:.2f} / {s['success']:.2f} |"
        )


async def start_engine(setup: Setup, args: argparse.Namespace, tmp: Path) -> Any:
    """The policy's engine under the setup's sampling and context (float32 like the checkpoint:
    "auto" would run the CPU build in bf16), warmed up on the first batch shapes (and the
    grammar path), which no mode then measures."""
    from agentgym_rl.inference.engine import EngineOptions, VllmEngine

    # the wiring is a placeholder: only `engine` is read
    config = mode_config(setup, ["http://127.0.0.1:1"], args, tmp, "tcp://127.0.0.1:1")
    opts = EngineOptions.from_config(
        config.engine, max_num_seqs=256, sampling_args=setup.sampling_args
    )
    t0 = time.perf_counter()
    engine = await VllmEngine.start(setup.model, opts)
    print(f"engine started in {time.perf_counter() - t0:.1f}s", flush=True)
    await asyncio.gather(
        *(engine.generate([1, 5, 7], max_tokens=16, request_id=f"w{i}") for i in range(8))
    )
    return engine


async def main_async(args: argparse.Namespace) -> int:
    t_start = time.perf_counter()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min)", flush=True)
    engine = None
    rows = []
    ok = True
    try:
        with tempfile.TemporaryDirectory(prefix="bench-rollout-") as name:
            tmp = Path(name)
            setup = quick_setup(tmp, args) if args.quick else policy_setup(tmp, args)
            engine = await start_engine(setup, args, tmp)
            for latency, groups, sync_groups in zip(
                args.latency_ms, args.groups, args.sync_groups, strict=True
            ):
                a, s = await run_latency(engine, setup, args, latency, (groups, sync_groups), tmp)
                rows.append((latency, a, s))
                ok = ok and a["groups"] == groups and s["groups"] == sync_groups
    finally:
        if engine is not None:
            engine.shutdown()
    print_table(rows)
    print(
        f"load average at end: {os.getloadavg()[0]:.2f} (1 min); "
        f"bench wall time {time.perf_counter() - t_start:.0f}s"
    )
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="CI smoke: tiny random model, 8 groups")
    p.add_argument("--model", type=Path, default=None, help="HF checkpoint (full form)")
    p.add_argument("--warmup-steps", type=int, default=200, help="of a policy the bench creates")
    p.add_argument(
        "--latency-ms", type=float, nargs="+", default=None, help="median step latencies"
    )
    p.add_argument("--groups", type=int, nargs="+", default=None, help="groups per mode, each")
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--groups-per-step", type=int, default=4, help="sync batch, in groups")
    p.add_argument(
        "--in-flight",
        nargs="+",
        default=None,
        help="async groups at once, one run each: a number (fixed) or auto (sized by the "
        "server up to --auto-cap); the last is the headline (full: 16 auto; quick: 16)",
    )
    p.add_argument("--auto-cap", type=int, default=64, help="the most groups auto may run")
    p.add_argument(
        "--sync-groups",
        type=int,
        nargs="+",
        default=None,
        help="groups of the sync runs, per latency (default: --groups; its rate is the same "
        "batch after batch, so fewer measure it as well)",
    )
    p.add_argument("--turns", type=int, default=None, help="turn cap (quick 6, full: config's)")
    p.add_argument("--max-tokens", type=int, default=None, help="per turn (quick 64, full: 24)")
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--sigma", type=float, default=1.0)
    add_policy_arguments(p)
    args = p.parse_args()
    args.in_flight = args.in_flight or (["16"] if args.quick else ["16", "auto"])
    bad = [x for x in args.in_flight if x != "auto" and not x.isdigit()]
    if bad:
        p.error(f"--in-flight takes numbers or auto, not {bad[0]!r}")
    args.max_in_flight = 16  # the engine options' placeholder config reads it
    if args.latency_ms is None:
        args.latency_ms = [40.0] if args.quick else [40.0, 500.0]
    if args.groups is None:
        args.groups = [8] if args.quick else [96, 160]
        # the sync loop at 500 ms makes under one episode a second: 40 groups measure its rate
        args.sync_groups = args.sync_groups or ([8] if args.quick else [96, 40])
    if len(args.groups) == 1:
        args.groups = args.groups * len(args.latency_ms)
    if len(args.groups) != len(args.latency_ms):
        p.error("--groups takes one count, or one per --latency-ms")
    args.sync_groups = args.sync_groups or args.groups
    if len(args.sync_groups) == 1:
        args.sync_groups = args.sync_groups * len(args.latency_ms)
    if len(args.sync_groups) != len(args.latency_ms):
        p.error("--sync-groups takes one count, or one per --latency-ms")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
