"""Step-wise context, side by side in one run: long episodes with the last k = 2 and 4 turns in
each prompt against the whole history, on the same vLLM engine, model, env server and tasks.

Each env's episodes run to a turn cap of 30 (`--turns`) through the agent loop that trains
(`episode/agent.py`: `AgentLoop` on a real env server, one vLLM engine per env, started once and
shared by its three settings), with a tiny random model made here whose every turn a vLLM
structured-output regex holds to a valid action (Maze: a move; the web env: a scroll or a hover
on a small id), so episodes last the whole cap unless they end. Per setting it prints:
- engine prompt tokens per episode (the prefill work asked of the engine, before any cache),
- the longest sample (tokens) and the mean turns played (full history stops early on the
  context limit, `--context`, as a long web episode does),
- learner tokens per episode (the samples' tokens: step-wise parts re-carry their window),
- learner tokens/s: one Megatron-core train step (the learner's loss and AdamW) over the samples
  of the setting's first `--learner-episodes` episodes (2: a rate, and a step over every
  episode's would take minutes on CPU) in micro-batches of `--token-budget` padded tokens, as
  the learner splits them,
- engine generated tokens/s over the setting's wall time,
- rollout memory: the bytes of the finished samples per episode (what the buffer holds: 13
  bytes a token) and the process's resident memory after the setting.
Then the full/k ratios of the longest sample and of the prompt tokens; target: both >= 3x at
k = 4 and 30 turns.

Full form: Maze (`--env-option max_steps=200`, so the cap ends it) and the web env's local shop
and forum (Chromium), 8 episodes each. Quick form (`--quick`, CI): Maze only, 4 episodes of 12
turns.

    python benches/bench_context.py [--quick] [--turns 30] [--episodes 8] [--env maze web]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from figures import figure

ROOT = Path(__file__).resolve().parents[1]
WINDOWS: list[int | None] = [2, 4, None]  # None: the whole history
REGEX = {
    "maze": r"Thought: [a-z]{1,8}( [a-z]{1,8}){0,2}\nAction: move (up|down|left|right)",
    "webarena": r"I act\. ```(scroll \[(up|down)\]|hover \[[1-9][0-9]?\])```",
}
SPLITS = {
    "maze": ROOT / "envs/agentgym_envs/maze/data/train.json",
    "webarena": ROOT / "envs/agentgym_envs/web/data/webarena_train.json",
}
SERVER_OPTIONS = {"maze": ["--env-option", "max_steps=200"], "webarena": []}


@dataclass
class Row:
    env: str
    window: int | None
    episodes: int
    turns: float
    prompt_tokens: float
    longest: int
    learner_tokens: float
    learner_tokens_s: float
    engine_tokens_s: float
    sample_kib: float
    rss_mib: float

    @property
    def name(self) -> str:
        return "full" if self.window is None else f"k={self.window}"


def corpus(seed: int = 0) -> list[str]:
    """Tokenizer text: both envs' prompts and actions, and observation-like words."""
    from agentgym_rl.config import ActionFormat
    from agentgym_rl.episode.prompts import system_prompt

    rng = random.Random(seed)
    words = "you are at row column goal open walls moves left moved up down left right".split()
    words += "link button textbox heading page shop forum price search add cart scroll".split()
    out = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) for _ in range(400)]
    out += [
        system_prompt("maze", ActionFormat.REACT),
        system_prompt("webarena", ActionFormat.WEBARENA),
    ]
    return out * 2


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class LearnerStep:
    """One Megatron-core train step over a list of micro-batches (the learner's loss)."""

    def __init__(self, model_dir: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from agentgym_rl.learner import convert
        from agentgym_rl.learner import model as lm

        hf = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        lm.init_parallel(tp=1, pp=1, seed=0)
        self.model = lm.build_gpt_model(hf.config, attention="sdpa", fused_swiglu=True)
        spec = convert.ConvertSpec.from_hf(hf.config, 1, self.model.vocab_size)
        convert.load_hf_weights(self.model, hf.state_dict(), spec)
        self.opt = torch.optim.AdamW(list(self.model.parameters()), lr=1e-6)

    def tokens_per_s(self, samples: list[Any], token_budget: int) -> float:
        """Real tokens over the seconds of one step on `samples` (a group through the wire)."""
        from agentgym_rl import _core
        from agentgym_rl.learner.batch import collate
        from agentgym_rl.wire import decode_group

        buffer = _core.TrajectoryBuffer(
            group_size=1, groups_per_step=1, max_staleness=100, max_in_flight=1, max_ready=1
        )
        ticket = buffer.try_admit("bench_0", "bench")
        assert ticket is not None
        buffer.add_episode(ticket.group_id, samples)
        group = decode_group(_core.encode_group(buffer.pop_ready()))
        batch = collate([group])
        real = int(batch.lengths.sum())
        self._step(batch, token_budget)  # warm-up: the first step at a new shape compiles
        t0 = time.perf_counter()
        self._step(batch, token_budget)
        return real / (time.perf_counter() - t0)

    def _step(self, batch: Any, token_budget: int) -> None:
        import torch

        from agentgym_rl.config.learn import LossConfig
        from agentgym_rl.learner import model as lm
        from agentgym_rl.learner.losses import policy_loss

        self.opt.zero_grad(set_to_none=True)
        for micro in batch.split(token_budget):
            logprobs = lm.token_logprobs(
                self.model, micro.input_ids, micro.position_ids, micro.labels, 1.0, fused=True
            )
            loss, _ = policy_loss(
                LossConfig(),
                logprobs=logprobs,
                behaviour_logprobs=micro.behaviour_logprobs,
                advantages=micro.loss_mask,  # advantage 1 on every trained token
                loss_mask=micro.loss_mask,
                global_tokens=batch.num_loss_tokens,
            )
            loss.backward()
        torch.nn.utils.clip_grad_norm_(list(self.model.parameters()), 1.0)
        self.opt.step()


async def run_setting(
    engine: Any, chat: Any, pool: Any, env: str, window: int | None, args: argparse.Namespace
) -> tuple[list[list[Any]], float, Any]:
    """`args.episodes` episodes at once under `window`; their samples, seconds and metrics."""
    from agentgym_rl.config import ActionFormat
    from agentgym_rl.env_discovery import env_traits
    from agentgym_rl.episode.agent import AgentLoop
    from agentgym_rl.episode.dataset import load_split
    from agentgym_rl.episode.metrics import RolloutMetrics
    from agentgym_rl.episode.types import EnvSpec, EpisodePlan, TurnBudget

    fmt = ActionFormat(env_traits(env).action_format)
    metrics = RolloutMetrics()
    agent = AgentLoop(
        engine,
        pool,
        chat,
        envs={env: EnvSpec(fmt, history_turns=window)},
        max_model_len=args.context,
        max_tokens_per_turn=48,
        metrics=metrics,
    )
    tasks = load_split(SPLITS[env], env)[: args.episodes]
    plans = [
        EpisodePlan(task, 0, TurnBudget(0, args.turns), f"{env}-{window}-e{i}")
        for i, task in enumerate(tasks)
    ]
    t0 = time.perf_counter()
    played = await asyncio.gather(*(agent.play(p) for p in plans))
    failed = [p.failure for p in played if p.failure is not None]
    if failed:  # an env failure ends an episode at once: its row would read as a short episode
        name = "full" if window is None else f"k={window}"
        print(f"  {env} {name}: {len(failed)} of {len(played)} episodes failed: {failed[0]}")
    return [list(p.samples) for p in played], time.perf_counter() - t0, metrics


async def bench_env(
    env: str, model: Path, args: argparse.Namespace, learner: LearnerStep
) -> list[Row]:
    from vllm.sampling_params import StructuredOutputsParams

    from agentgym_rl import _core
    from agentgym_rl.config.rollout import http_dialect
    from agentgym_rl.inference.engine import EngineOptions, VllmEngine
    from agentgym_rl.processes.env_servers import EnvServerProcess
    from agentgym_rl.trajectory import ChatTokenizer

    chat = ChatTokenizer.from_dir(model)
    server = EnvServerProcess(env, python=sys.executable).start(*SERVER_OPTIONS[env], timeout_s=300)
    opts = EngineOptions(
        max_model_len=args.context,
        max_num_seqs=32,
        dtype="float32",
        temperature=1.0,
        sampling_args={"structured_outputs": StructuredOutputsParams(regex=REGEX[env])},
    )
    engine = await VllmEngine.start(model, opts)
    rows = []
    try:
        pool = _core.EnvPool(
            [_core.EnvServer(env, server.http, dialect=http_dialect(env))], step_timeout_s=120.0
        )
        warm = argparse.Namespace(**{**vars(args), "episodes": 2, "turns": 3})
        await run_setting(engine, chat, pool, env, None, warm)  # the engine's first calls
        for window in WINDOWS:
            episodes, seconds, metrics = await run_setting(engine, chat, pool, env, window, args)
            samples = [s for e in episodes for s in e]
            n = len(episodes)
            tokens = sum(len(s.input_ids) for s in samples)
            rows.append(
                Row(
                    env,
                    window,
                    n,
                    sum(e[-1].turns for e in episodes) / n,
                    metrics.prompt_tokens / n,
                    max(len(s.input_ids) for s in samples),
                    tokens / n,
                    learner.tokens_per_s(
                        [s for e in episodes[: args.learner_episodes] for s in e], args.token_budget
                    ),
                    metrics.generated_tokens / seconds,
                    13 * tokens / n / 1024,
                    rss_mib(),
                )
            )
            print(f"  {env} {rows[-1].name}: episodes in {seconds:.1f} s", flush=True)
    finally:
        engine.shutdown()
        server.stop()
    return rows


def report(rows: list[Row]) -> None:
    head = (
        f"{'env':<9} {'context':<7} {'turns':>6} {'prompt tok/ep':>14} {'longest':>8} "
        f"{'learner tok/ep':>15} {'learner tok/s':>14} {'engine tok/s':>13} "
        f"{'samples KiB/ep':>15} {'RSS MiB':>8}"
    )
    print(head)
    for r in rows:
        print(
            f"{r.env:<9} {r.name:<7} {r.turns:>6.1f} {r.prompt_tokens:>14.0f} {r.longest:>8d} "
            f"{r.learner_tokens:>15.0f} {r.learner_tokens_s:>14.0f} {r.engine_tokens_s:>13.1f} "
            f"{r.sample_kib:>15.1f} {r.rss_mib:>8.0f}"
        )
    for env in dict.fromkeys(r.env for r in rows):
        full = next(r for r in rows if r.env == env and r.window is None)
        for r in rows:
            if r.env == env and r.window is not None:
                print(
                    f"{env} {r.name}: longest sample {full.longest / r.longest:.2f}x below full "
                    f"history, engine prompt tokens/episode {full.prompt_tokens / r.prompt_tokens:.2f}x"
                    f" below (full played {full.turns:.1f} turns, {r.name} {r.turns:.1f})"
                )
                figure(
                    "context", f"{env} {r.name}: engine prompt tokens/episode", r.prompt_tokens,
                    "tokens", baseline=full.prompt_tokens, baseline_name="whole history",
                    lower_is_better=True, target=">= 3x below at k=4" if r.window == 4 else "",
                )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Maze only, 4 episodes (CI)")
    parser.add_argument("--turns", type=int, default=None, help="turn cap (30; quick 12)")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per setting")
    parser.add_argument("--env", nargs="+", choices=["maze", "webarena"], default=None)
    parser.add_argument("--context", type=int, default=8192, help="engine context (tokens)")
    parser.add_argument("--token-budget", type=int, default=8192, help="learner micro-batch tokens")
    parser.add_argument(
        "--learner-episodes", type=int, default=2, help="episodes the learner step trains on"
    )
    args = parser.parse_args()
    args.episodes = args.episodes or (4 if args.quick else 8)
    args.turns = args.turns or (12 if args.quick else 30)
    envs = args.env or (["maze"] if args.quick else ["maze", "webarena"])

    from agentgym_rl.learner import model as lm
    from agentgym_rl.policy_creation import create_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model = create_tiny_model(
            Path(tmp) / "model",
            corpus=corpus(),
            vocab_size=1024,
            hidden=128,
            head_dim=64,
            max_positions=args.context,
        )
        learner = LearnerStep(model)
        print(
            f"{args.episodes} episodes per setting, turn cap {args.turns}, context "
            f"{args.context}, CPU",
            flush=True,
        )
        rows = []
        for env in envs:
            rows += asyncio.run(bench_env(env, model, args, learner))
        lm.shutdown_parallel()
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
