"""What a real model costs, side by side with the 2M policy in one run: SmolLM2-135M-Instruct
(prepared as `init-model --base smollm2-135m-instruct` does) against the README run's created 2M
Qwen2, each under its own train config (babyai_goto_smollm2.yaml, babyai_goto.yaml), float32.

Per model, each part in its own process:
1. generation: the rollout server's generated tokens/s against vLLM's offline `LLM.generate`
   on the turns it played (bench_ceiling.py, 16 groups in flight);
2. the async/sync ratio at 500 ms env steps (bench_rollout.py, the config's groups in flight);
3. the learner: tokens/s, bytes per weight update and peak resident memory, full fine-tuning
   and LoRA rank 16 (bench_lora.py --model: 8 samples of 400-800 tokens a step);
4. a real `train` of a few steps (BabyAI GoTo, `groups_per_step` 2, no in-run evaluation): a
   step's wall time split into waiting for rollouts, learning and the weight update (from the
   learner's metrics), and each process's peak resident memory (sampled every 0.5 s: the
   learner, the rollout server with its vLLM engine, the env servers).
Then one table: the figure, the 2M policy, SmolLM2, and SmolLM2's ratio.

The SmolLM2 folder is the base without the format warm-up (its turns run to the 24-token
cap): the figures per token and per step are a run's, the per-episode ones the base's.
`--smollm2 DIR` measures a warmed-up or trained folder instead. Full form: 94 minutes on 2 AVX2
cores in float32, 88 of them SmolLM2's (docs/results/smollm2-goto, section 4). Quick form
(`--quick`): one tiny created model and each part's smallest size, for the plumbing.

    python benches/bench_model.py [--quick] [--smollm2 DIR] [--main DIR] [--steps 4]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym_rl.experiments.soak_figures import children, tree_figures
from bench_lora import run_one
from bench_rollout import CREATED_MODELS, ROOT, TRAIN_CONFIG, corpus
from figures import figure, run_script

HERE = Path(__file__).resolve().parent
SMOLLM2_CONFIG = ROOT / "configs" / "train" / "babyai_goto_smollm2.yaml"
FP32 = ["learn.precision=fp32", "rollout.engine.dtype=float32"]
"""Every model in float32: this bench's hosts may compute bf16 in software (docs/train.md)."""


@dataclass(frozen=True)
class Model:
    label: str
    folder: Path
    config: Path


def prepared_smollm2() -> Path:
    """The SmolLM2 base as `init-model --base` converts it, made once under runs/bench/."""
    from agentgym_rl.policy_creation.pretrained import prepare_base

    out = CREATED_MODELS / "smollm2-135m-instruct"
    if not (out / "config.json").is_file():
        prepare_base("smollm2-135m-instruct", out, say=lambda line: print(f"  {line}"))
    return out


def models(args: argparse.Namespace, tmp: Path) -> list[Model]:
    if args.quick:
        from agentgym_rl.policy_creation import create_tiny_model

        tiny = create_tiny_model(
            tmp / "tiny", corpus=corpus(), vocab_size=1024, hidden=128, head_dim=64
        )
        return [Model("tiny", tiny, TRAIN_CONFIG)]
    from agentgym_rl.config.loader import load_config
    from agentgym_rl.config.train import TrainConfig
    from bench_rollout import created_policy

    main = args.main or created_policy(load_config(TrainConfig, TRAIN_CONFIG), TRAIN_CONFIG, 200)
    return [
        Model("2M", Path(main), TRAIN_CONFIG),
        Model("SmolLM2-135M", Path(args.smollm2 or prepared_smollm2()), SMOLLM2_CONFIG),
    ]


def sub_bench(script: str, argv: list[str]) -> list[Any]:
    """Run a bench script; its figures (its other output passed through, indented)."""
    code, found = run_script(HERE / script, argv, indent="    ")
    if code != 0:
        raise RuntimeError(f"{script} {' '.join(argv)} exited {code}")
    return found


def in_flight(config: Path) -> int:
    """The groups a train config runs at once (`rollout.buffer.max_in_flight`)."""
    from agentgym_rl.config.loader import load_config
    from agentgym_rl.config.train import TrainConfig

    return load_config(TrainConfig, config).rollout.buffer.max_in_flight


def generation(m: Model, args: argparse.Namespace) -> dict[str, float]:
    argv = ["--model", str(m.folder), "--config", str(m.config), "--dtype", "float32"]
    if args.quick:
        ceil = sub_bench("bench_ceiling.py", ["--quick"])
        roll = sub_bench("bench_rollout.py", ["--quick"])
    else:
        ceil = sub_bench(
            "bench_ceiling.py", [*argv, "--groups", str(args.groups), "--max-in-flight", "16"]
        )
        # the config's own cap: `auto` (up to 64 groups) overran SmolLM2's 2 GB KV cache on
        # 2 cores, its waiting episodes' prefixes evicted and computed again (14 tokens/s
        # against 35 at 16 groups with a cache sized for them; docs/results/smollm2-goto)
        roll = sub_bench(
            "bench_rollout.py",
            [*argv, "--latency-ms", "500", "--in-flight", str(in_flight(m.config)),
             "--groups", str(args.groups), "--sync-groups", str(args.sync_groups)],
        )  # fmt: skip
    served = next(f for f in ceil if f.name.startswith("generated tokens/s"))
    episodes = next(f for f in roll if f.name.startswith("episodes at") and "steady" not in f.name)
    return {
        "generated tokens/s, rollout server": served.value,
        "generated tokens/s, vLLM offline generate": served.ceiling,
        "rollout server of offline generate": served.value / served.ceiling,
        "episodes/s, async": episodes.value,
        "episodes/s, sync": episodes.baseline,
        "async / sync": episodes.value / episodes.baseline,
    }


def learner(m: Model, args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    out = {}
    for rank, mode in ((0, "full"), (16, "LoRA r16")):
        row = run_one(str(m.folder), rank, 1 if args.quick else 2, tmp)
        out[f"learner tokens/s, {mode}"] = row["tokens_per_s"]
        out[f"MB per weight update, {mode}"] = row["update_bytes"] / 1e6
        out[f"learner peak RSS GB, {mode}"] = row["peak_rss_bytes"] / 1e9
    return out


class MemorySampler:
    """Peak resident memory of each child tree of a process, sampled in a thread."""

    def __init__(self, pid: int, interval_s: float = 0.5) -> None:
        self.root = pid
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._interval = interval_s
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def role(cmdline: list[str]) -> str | None:
        line = " ".join(cmdline)
        if "watchdog.py" in line:  # each child's small guard (processes/watchdog.py)
            return None
        if "serve-rollouts" in line:
            return "rollout server + engine"
        if " learn" in line or "torchrun" in line:
            return "learner"
        return "env servers"

    def _sample(self) -> None:
        now: dict[str, float] = {}
        for child in children(self.root):
            try:
                raw = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:  # exited since the listing
                continue
            role = self.role(raw.decode(errors="replace").split("\0"))
            if role is None:
                continue
            now[role] = now.get(role, 0.0) + tree_figures(child)[0] * 2**20 / 1e9
        for role, gb in now.items():
            self.peaks[role] = max(self.peaks.get(role, 0.0), gb)

    def _run(self) -> None:
        # processes that end between the listing and the read are skipped inside; anything
        # else is a bug, printed by threading's hook, not a silent hole in the peaks
        while not self._stop.wait(self._interval):
            self._sample()

    def close(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.peaks


def train_steps(m: Model, args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    """A short real `train`: the split of its steps after the first, and each process's peak."""
    run = tmp / f"train-{m.label}"
    steps = 2 if args.quick else args.steps
    cmd = [
        sys.executable, "-m", "agentgym_rl.cli", "train", "--config", str(m.config),
        f"model={m.folder}", f"run_dir={run}", f"learn.max_steps={steps}", "rollout.eval=null",
        "groups_per_step=2", "learn.checkpoint.every_steps=1000",
        # every group goes to the learner: a base that has not learned the format fails every
        # episode alike, and the zero-variance filter would leave the learner waiting
        "learn.optimizer.warmup_steps=1", "rollout.buffer.filter_zero_variance=false", *FP32,
    ]  # fmt: skip
    if m.config == SMOLLM2_CONFIG:
        cmd.append("init_model.warmup_precision=fp32")
    t0 = time.perf_counter()
    with (tmp / f"train-{m.label}.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        sampler = MemorySampler(proc.pid)
        try:
            code = proc.wait()
        finally:
            peaks = sampler.close()
            if proc.poll() is None:  # this bench was stopped: stop the run with it
                proc.terminate()
                proc.wait(timeout=120)
    if code != 0:
        tail = (tmp / f"train-{m.label}.log").read_text()[-3000:]
        raise RuntimeError(f"train of {m.label} exited {code}:\n{tail}")
    rows = [json.loads(x) for x in (run / "learn" / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "step_s" in r]
    later = list(itertools.pairwise(rows))  # the first step waits on the engine's start
    wait = sum(b["time"] - a["time"] - b["step_s"] - a.get("sync_s", 0.0) for a, b in later)
    learn = sum(b["step_s"] for _, b in later)
    sync = sum(a.get("sync_s", 0.0) for a, _ in later)
    n = max(len(later), 1)
    out = {
        "train wall s": time.perf_counter() - t0,
        "step s": (wait + learn + sync) / n,
        "step: waiting for rollouts s": wait / n,
        "step: learning s": learn / n,
        "step: weight update s": sync / n,
        "step tokens": sum(b["tokens"] for _, b in later) / n,
    }
    out.update({f"peak RSS GB, {role}": gb for role, gb in sorted(peaks.items())})
    return out


def measure(m: Model, args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    print(f"\n== {m.label}: {m.folder} under {m.config.name} ==", flush=True)
    out: dict[str, float] = {}
    for part, fn in (
        ("generation", lambda: generation(m, args)),
        ("learner", lambda: learner(m, args, tmp)),
        ("train", lambda: train_steps(m, args, tmp)),
    ):
        t0 = time.perf_counter()
        print(f"  {part} ...", flush=True)
        out.update(fn())
        print(f"  {part}: {time.perf_counter() - t0:.0f}s", flush=True)
    return out


def unit_of(name: str) -> str:
    """A row's unit, read off its name ("x": a ratio)."""
    for unit in ("tokens/s", "episodes/s", "GB", "MB"):
        if unit in name.split(", ")[0].split():
            return unit
    if name.endswith(" s"):
        return "s"
    return "tokens" if name.endswith("tokens") else "x"


def report(found: dict[str, dict[str, float]]) -> None:
    labels = list(found)
    pair = len(labels) == 2
    print("\n| figure | " + " | ".join(labels) + (" | ratio |" if pair else " |"))
    print("|---|" + "---:|" * (len(labels) + pair))
    for name in found[labels[0]]:
        values = [found[x].get(name) for x in labels]
        cells = ["" if v is None else f"{v:,.3g}" if v < 100 else f"{v:,.0f}" for v in values]
        if pair:
            a, b = values
            cells.append(f"{b / a:.2f}x" if a and b is not None else "")
        print(f"| {name} | " + " | ".join(cells) + " |")
    small, real = labels[0], labels[-1]
    for name, value in found[real].items():  # every row in the record, the 2M's as baseline
        unit = unit_of(name)
        figure(
            "model", f"{name}, {real}", value, unit,
            **({"baseline": found[small][name], "baseline_name": small} if real != small else {}),
            lower_is_better=unit in ("GB", "MB", "s"),
        )  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="one tiny model, each part's least")
    p.add_argument("--smollm2", type=Path, default=None, help="a SmolLM2 folder to measure")
    p.add_argument("--main", type=Path, default=None, help="the 2M policy (default: created)")
    p.add_argument("--groups", type=int, default=32, help="async groups per generation part")
    p.add_argument("--sync-groups", type=int, default=8, help="groups of the sync run")
    p.add_argument("--steps", type=int, default=4, help="train steps (the first not counted)")
    args = p.parse_args()
    if args.steps < 2:
        p.error("--steps must be >= 2: the first step is not counted")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-model-") as name:
        tmp = Path(name)
        found = {m.label: measure(m, args, tmp) for m in models(args, tmp)}
    report(found)
    print(f"bench wall time {time.perf_counter() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
