"""The `agentgym-rl` command. Parses arguments only; each subcommand imports its stack lazily."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentgym_rl.env_cli import add_env_subcommands
from agentgym_rl.eval_cli import add_arguments as add_eval_arguments
from agentgym_rl.init_cli import add_arguments as add_init_arguments
from agentgym_rl.learn import add_arguments as add_learn_arguments
from agentgym_rl.plot_cli import add_arguments as add_plot_arguments
from agentgym_rl.serve_rollouts import add_arguments as add_rollout_arguments
from agentgym_rl.show_cli import add_arguments as add_show_arguments
from agentgym_rl.train_cli import add_arguments as add_train_arguments


def _bench(args: argparse.Namespace) -> int:
    from agentgym_rl.bench_runner import run_benches

    return run_benches(only=args.only, quick=args.quick)


def _serve_rollouts(args: argparse.Namespace) -> int:
    from agentgym_rl.serve_rollouts import run

    return run(args)


def _learn(args: argparse.Namespace) -> int:
    from agentgym_rl.learn import run

    return run(args)


def _train(args: argparse.Namespace) -> int:
    from agentgym_rl.train_cli import run

    return run(args)


def _plot(args: argparse.Namespace) -> int:
    from agentgym_rl.plot_cli import run

    return run(args)


def _eval(args: argparse.Namespace) -> int:
    from agentgym_rl.eval_cli import run

    return run(args)


def _show(args: argparse.Namespace) -> int:
    from agentgym_rl.show_cli import run

    return run(args)


def _init_model(args: argparse.Namespace) -> int:
    from agentgym_rl.init_cli import run

    return run(args)


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
        "pyzmq, env pool vs an AgentGym-style client, async rollouts vs --sync on vLLM) and "
        "prints the figures and ratios.",
    )
    bench.add_argument(
        "--only",
        action="append",
        choices=["builder", "codec", "transport", "envpool", "rollout", "learner"],
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
    add_rollout_arguments(rollouts)
    rollouts.set_defaults(func=_serve_rollouts)

    learn = sub.add_parser(
        "learn",
        help="train the policy on streamed groups and publish new weights",
        description="Receives GRPO groups from rollout servers, drops stale and malformed ones "
        "(counted), takes one AdamW step per groups_per_step groups on a Megatron-core model, "
        "publishes HF-named weights and writes resumable checkpoints. Run under torchrun for "
        "tensor/data parallelism.",
    )
    add_learn_arguments(learn)
    learn.set_defaults(func=_learn)

    train = sub.add_parser(
        "train",
        help="run env servers, rollout servers and the learner together, supervised",
        description="Starts the env servers, serve-rollouts and learn (torchrun when "
        "learner_procs > 1) as child processes on 127.0.0.1 wired over ZeroMQ, shows progress, "
        "stops everything in order on Ctrl-C/SIGTERM and writes plots and a summary at the end. "
        "See docs/train.md.",
    )
    add_train_arguments(train)
    train.set_defaults(func=_train)

    plot = sub.add_parser(
        "plot",
        help="regenerate a run's plots and summary, or overlay several runs",
        description="RUN_DIR: writes RUN_DIR/plots/*.png and RUN_DIR/summary.md; several runs "
        "with --out DIR: their curves overlaid in DIR.",
    )
    add_plot_arguments(plot)
    plot.set_defaults(func=_plot)

    evaluate = sub.add_parser(
        "eval",
        help="Avg@n and Pass@n per env and category for a checkpoint or an API model",
        description="Runs every task of a split n times with the training agent loop on a "
        "local checkpoint (vLLM) or over an OpenAI-compatible chat endpoint, starts the env "
        "servers it is not given, prints the table and writes eval.md/eval.json. See docs/eval.md.",
    )
    add_eval_arguments(evaluate)
    evaluate.set_defaults(func=_eval)

    show = sub.add_parser(
        "show",
        help="print a logged episode as a transcript with its loss mask visible",
        description="Decodes one episode of a run's episodes.jsonl with the run's tokenizer: "
        "trained (generated) tokens highlighted, masked tokens dim, with reward, turn cap, "
        "status and the policy version of each turn.",
    )
    add_show_arguments(show)
    show.set_defaults(func=_show)

    init_model = sub.add_parser(
        "init-model",
        help="create the default policy locally: tokenizer, small Qwen2, format warm-up",
        description="Plays training tasks with random valid actions, trains a BPE tokenizer on "
        "the environment's text, writes a small Qwen2-architecture checkpoint (head dim 64) and "
        "teaches it the action format by next-token training on those random-action "
        "transcripts (no expert data). Any HF checkpoint folder can be used in its place.",
    )
    add_init_arguments(init_model)
    init_model.set_defaults(func=_init_model)

    info = sub.add_parser("info", help="print the version")
    info.set_defaults(func=_info)
    add_env_subcommands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
