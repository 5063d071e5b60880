"""Runs the benchmarks of benches/ one after another, each in its own interpreter, and prints
their figures side by side with the baselines they replace: builder vs Python re-render, codec
GB/s, transport vs raw pyzmq, env pool vs an AgentGym-style client, async rollouts vs --sync on
vLLM, the rollout loop vs vLLM's offline generate over the same turns (the engine's ceiling),
Megatron learner step vs transformers, SciWorld, retrieval, the web env, weight updates
relayed in a tree vs the learner's star, Wordle's and Maze's steps/s vs the bare loop, step-wise
context (the last k turns) vs the whole history on long episodes, micro-batch cuts that weigh
padding against a pass's fixed cost vs the fewest micro-batches, the run viewer's first pages of
a million-episode log vs indexing it all. CI runs
each one's --quick form.

    python benches/run.py [--only NAME ...] [--quick]

A checkout tool: the benches measure this source tree and use its test fixtures, so they do not
ship in the wheel.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

BENCHES = {
    "builder": "bench_builder.py",
    "codec": "bench_codec.py",
    "transport": "bench_transport.py",
    "envpool": "bench_envpool.py",
    "rollout": "bench_rollout.py",
    "ceiling": "bench_ceiling.py",
    "learner": "bench_learner.py",
    "sciworld": "bench_sciworld.py",
    "retrieval": "bench_retrieval.py",
    "web": "bench_web.py",
    "games": "bench_games.py",
    "tools": "bench_tools.py",
    "gateway": "bench_gateway.py",
    "weights": "bench_weights.py",
    "context": "bench_context.py",
    "padding": "bench_padding.py",
    "lora": "bench_lora.py",
    "viewer": "bench_viewer.py",
}
HERE = Path(__file__).resolve().parent


def run_benches(only: list[str] | None, quick: bool) -> int:
    """Each bench in turn, its output passed through; then every headline figure in one table."""
    from figures import parse, table  # beside this script (on the path when it runs)

    failed, figures = [], []
    for name in only or list(BENCHES):
        script = HERE / BENCHES[name]
        print(f"\n=== {name}: {script.name} ===", flush=True)
        cmd = [sys.executable, str(script)] + (["--quick"] if quick else [])
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1) as bench:
            assert bench.stdout is not None
            for line in bench.stdout:
                found = parse(line.rstrip("\n"))
                if found is None:
                    print(line, end="", flush=True)
                else:
                    figures.append(found)
        if bench.returncode != 0:
            failed.append(name)
    print(f"\n=== every figure{' (quick forms)' if quick else ''} ===")
    print(table(figures))
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benches/run.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--only", action="append", choices=list(BENCHES), help="run only this one (repeatable)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI smoke runs")
    args = parser.parse_args(argv)
    return run_benches(args.only, args.quick)


if __name__ == "__main__":
    sys.exit(main())
