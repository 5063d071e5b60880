"""Runs the benchmarks of benches/ one after another, each in its own interpreter, and prints
their figures side by side with the baselines they replace: builder vs Python re-render, codec
GB/s, transport vs raw pyzmq, env pool vs an AgentGym-style client, async rollouts vs --sync on
vLLM, the rollout loop vs vLLM's offline generate over the same turns (the engine's ceiling),
Megatron learner step vs transformers, SciWorld, retrieval, the web env, weight updates
relayed in a tree vs the learner's star, Wordle's and Maze's steps/s vs the bare loop, step-wise
context (the last k turns) vs the whole history on long episodes, micro-batch cuts that weigh
padding against a pass's fixed cost vs the fewest micro-batches, the run viewer's first pages of
a million-episode log vs indexing it all, rollouts rewarded by a judge vs by the env alone,
SmolLM2-135M's generation, learner, weight updates and step beside the 2M policy's. CI runs
each one's --quick form. Every run writes one JSON record of its figures and what they were
measured on (`records.py`); docs/performance.md's table is rendered from a full run's
(`python scripts/record_figures.py render RECORD`).

    python benches/run.py [--only NAME ...] [--quick] [--record-dir DIR]

A checkout tool: the benches measure this source tree and use its test fixtures, so they do not
ship in the wheel.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
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
    "judge": "bench_judge.py",
    "model": "bench_model.py",
}
HERE = Path(__file__).resolve().parent


def run_benches(only: list[str] | None, quick: bool, record_dir: Path | None = None) -> int:
    """Each bench in turn, its output passed through; then every headline figure in one table,
    kept in the run's record (`records.py`)."""
    from figures import run_script, table  # beside this script (on the path when it runs)
    from records import default_folder, main_argv, new_record, write

    names = only or list(BENCHES)
    record = new_record(names, quick, main_argv())
    failed, figures = [], []
    for name in names:
        script = HERE / BENCHES[name]
        print(f"\n=== {name}: {script.name} ===", flush=True)
        t0 = time.monotonic()
        code, found = run_script(script, ["--quick"] if quick else [])
        figures.extend(found)
        seconds = round(time.monotonic() - t0, 1)
        record["benches"][name] = {"exit": code, "seconds": seconds}
        if code != 0:
            failed.append(name)
    print(f"\n=== every figure{' (quick forms)' if quick else ''} ===")
    print(table(figures))
    record["figures"] = [asdict(f) for f in figures]
    print(f"\nrecord: {write(record, record_dir or default_folder(quick))}")
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
    parser.add_argument(
        "--record-dir",
        type=Path,
        default=None,
        help="where the run's JSON record goes (default: docs/results/benches for a full run, "
        "runs/benches for --quick)",
    )
    args = parser.parse_args(argv)
    return run_benches(args.only, args.quick, args.record_dir)


if __name__ == "__main__":
    sys.exit(main())
