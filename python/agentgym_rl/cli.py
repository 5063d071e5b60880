"""The `agentgym-rl` command. Parses arguments only; each subcommand imports its stack lazily."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentgym_rl import (
    chaos_cli,
    compare_cli,
    eval_cli,
    init_cli,
    plot_cli,
    secret_cli,
    serve_rollouts,
    show_cli,
    soak_cli,
    train_cli,
)
from agentgym_rl import learn as learn_cli
from agentgym_rl.bench_runner import BENCHES
from agentgym_rl.env_cli import add_env_subcommands

# Each command module parses with argparse only and imports its stack inside `run`, so the
# modules are imported here and their `run` is the handler.


def _bench(args: argparse.Namespace) -> int:
    from agentgym_rl.bench_runner import run_benches

    return run_benches(only=args.only, quick=args.quick)


def _info(_: argparse.Namespace) -> int:
    import agentgym_rl

    print(f"agentgym-rl {agentgym_rl.__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentgym-rl",
        description="Train LLM agents with multi-turn RL: asynchronous rollouts, Rust core.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    bench = sub.add_parser(
        "bench",
        help="run the throughput benchmarks, each side by side with the baseline it replaces",
        description="Runs benches/ (builder vs Python re-render, codec GB/s, transport vs raw "
        "pyzmq, env pool vs an AgentGym-style client, async rollouts vs --sync on vLLM, Megatron "
        "learner step vs transformers, weight updates relayed in a tree vs the learner's star) and prints the figures and ratios. CI runs each one's "
        "--quick form.",
    )
    bench.add_argument(
        "--only",
        action="append",
        choices=list(BENCHES),
        help="run only this benchmark (repeatable)",
    )
    bench.add_argument("--quick", action="store_true", help="small sizes, for CI smoke runs")
    bench.set_defaults(func=_bench)

    rollouts = sub.add_parser(
        "serve-rollouts",
        help="generate rollouts continuously and stream finished groups to learners",
        description="Starts the vLLM engine and the env pool, runs episodes under staleness "
        "admission with ScalingInter turn caps, and streams finished GRPO groups to the "
        "learner endpoints. SIGTERM stops admission, finishes or aborts in-flight episodes and "
        "flushes.",
    )
    serve_rollouts.add_arguments(rollouts)
    rollouts.set_defaults(func=serve_rollouts.run)

    learn = sub.add_parser(
        "learn",
        help="train the policy on streamed groups and publish new weights",
        description="Receives GRPO groups from rollout servers, drops stale and malformed ones "
        "(counted), takes one AdamW step per groups_per_step groups on a Megatron-core model, "
        "publishes HF-named weights and writes resumable checkpoints. Run under torchrun for "
        "tensor/data parallelism.",
    )
    learn_cli.add_arguments(learn)
    learn.set_defaults(func=learn_cli.run)

    train = sub.add_parser(
        "train",
        help="run env servers, rollout servers and the learner together, supervised",
        description="Starts the env servers, serve-rollouts and learn (torchrun when "
        "learner_procs > 1) as child processes on 127.0.0.1 wired over ZeroMQ, shows progress, "
        "stops everything in order on Ctrl-C/SIGTERM and writes plots and a summary at the end. "
        "See docs/train.md.",
    )
    train_cli.add_arguments(train)
    train.set_defaults(func=train_cli.run)

    chaos = sub.add_parser(
        "chaos",
        help="a train run with env servers, rollout servers or the learner killed on purpose",
        description="Runs `train --config FILE`, SIGKILLs the chosen children when the learner "
        "reaches the chosen steps (env and rollout servers are restarted by the supervisor, a "
        "killed learner is continued with `train --resume`), and prints for each fault the "
        "seconds until the learner stepped again and the steps lost, then where every group "
        "went. Exit 0 when every fault was recovered from and the group accounting balances.",
    )
    chaos_cli.add_arguments(chaos)
    chaos.set_defaults(func=chaos_cli.run)

    compare = sub.add_parser(
        "compare",
        help="the async design against the reference's synchronous regime: train both on one "
        "config at an injected env latency, plot held-out success against wall-clock minutes",
        description="Runs `train` on --config in both modes (async, sync), --runs times each, "
        "with the env servers' injected step latency, then writes REPORT/compare.png (held-out "
        "success against wall-clock minutes), compare.md / compare.json (minutes to reach the "
        "sync runs' final success, seconds per step, engine and learner idle shares, ratios) "
        "and each run's records. Finished runs are kept: rerun to continue a comparison.",
    )
    compare_cli.add_arguments(compare)
    compare.set_defaults(func=compare_cli.run)

    plot = sub.add_parser(
        "plot",
        help="regenerate a run's plots and summary, or overlay several runs",
        description="RUN_DIR: writes RUN_DIR/plots/*.png and RUN_DIR/summary.md; several runs "
        "with --out DIR: their curves overlaid in DIR.",
    )
    plot_cli.add_arguments(plot)
    plot.set_defaults(func=plot_cli.run)

    evaluate = sub.add_parser(
        "eval",
        help="Avg@n and Pass@n per env and category for a checkpoint or an API model",
        description="Runs every task of a split n times with the training agent loop on a "
        "local checkpoint (vLLM) or over an OpenAI-compatible chat endpoint, starts the env "
        "servers it is not given, prints the table and writes eval.md/eval.json. See docs/eval.md.",
    )
    eval_cli.add_arguments(evaluate)
    evaluate.set_defaults(func=eval_cli.run)

    show = sub.add_parser(
        "show",
        help="print a logged episode as a transcript with its loss mask visible",
        description="Decodes one episode of a run's episodes.jsonl with the run's tokenizer: "
        "trained (generated) tokens highlighted, masked tokens dim, with reward, turn cap, "
        "status and the policy version of each turn.",
    )
    show_cli.add_arguments(show)
    show.set_defaults(func=show_cli.run)

    init_model = sub.add_parser(
        "init-model",
        help="create the default policy locally: tokenizer, small Qwen2, format warm-up",
        description="Plays training tasks with random valid actions, trains a BPE tokenizer on "
        "the environment's text, writes a small Qwen2-architecture checkpoint (head dim 64) and "
        "teaches it the action format by next-token training on those random-action "
        "transcripts (no expert data). Any HF checkpoint folder can be used in its place.",
    )
    init_cli.add_arguments(init_model)
    init_model.set_defaults(func=init_cli.run)

    secret = sub.add_parser(
        "secret",
        help="write a new secret that signs a split cluster's group and weight messages",
        description="Writes 256 random bits as hex to PATH, readable by its owner only (0600). "
        "Every learn and serve-rollouts process of the run names the file in its config "
        "(auth.secret_file) or receives the secret in AGENTGYM_RL_SECRET; never on the command "
        "line. `train` makes a new secret for each run by itself.",
    )
    secret_cli.add_arguments(secret)
    secret.set_defaults(func=secret_cli.run)

    soak = sub.add_parser(
        "soak",
        help="run many episodes per env and check that memory, descriptors and tasks stay flat",
        description="For each env: its env servers (--env-servers) and one serve-rollouts "
        "process (real vLLM, a small model) whose groups are taken and dropped (no learner). "
        "Every --every episodes it "
        "samples resident memory and open file descriptors of each process tree, and the live "
        "episodes and asyncio tasks each process reports (with the mean and highest of readings "
        "twice a second between samples); prints the table and fails if a figure grew by more "
        "than 10% after the first --every episodes (memory, descriptors and asyncio tasks: "
        "the mean of each stretch). Ctrl-C or SIGTERM stops it and keeps the samples so far.",
    )
    soak_cli.add_arguments(soak)
    soak.set_defaults(func=soak_cli.run)

    info = sub.add_parser("info", help="print the version")
    info.set_defaults(func=_info)
    add_env_subcommands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
