"""`agentgym-rl soak`: episodes through a rollout server and its env servers, per env, printing
what must stay flat (memory, file descriptors, live episodes, asyncio tasks) every N episodes.
Exit 0 when every figure stayed within 10% of its value after the first N episodes, 1 when one
grew (named), 2 when an env cannot run here, 130 / 143 when stopped by Ctrl-C / SIGTERM (the
processes are stopped and the env in hand keeps its samples so far in its soak.json)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentgym_rl.experiments.soak_figures import SoakResult

DEFAULT_ENVS = (
    "babyai",
    "textcraft",
    "searchqa",
    "sciworld",
    "webarena",
    "miniwob",
    "wordle",
    "maze",
)

NAME = "soak"
HELP = "run many episodes per env and check that memory, descriptors and tasks stay flat"
CHILDREN = "the env servers it soaks"
STOP_S = 90.0
"""From SIGINT/SIGTERM to exit: its rollout server drained (30 s at most), its env servers
stopped and read at rest (10 s each), the table printed."""
DESCRIPTION = (
    "For each env: its env servers (--env-servers) and one serve-rollouts process (real "
    "vLLM, a small model) whose groups are taken and dropped (no learner). Every --every "
    "episodes it samples resident memory and open file descriptors of each process tree, "
    "and the live episodes and asyncio tasks each process reports (with the mean and "
    "highest of readings four times a second between samples); prints the table and fails if a "
    "figure grew by more than 10% after the first --every episodes (memory and asyncio "
    "tasks: the mean of each stretch; descriptors: at rest, each env server's before and after "
    "the rollout server, the rollout server's at the first mark and the last, its groups held "
    "until no episode is live). Ctrl-C or SIGTERM stops it and keeps "
    "the samples so far."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env",
        action="append",
        dest="envs",
        metavar="ENV",
        help="env to soak (repeatable; default: every env that can run here, one after another)",
    )
    parser.add_argument("--episodes", type=int, default=10_000, help="episodes per env")
    parser.add_argument("--every", type=int, default=1_000, help="sample every N episodes")
    parser.add_argument(
        "--model",
        type=Path,
        help="HF checkpoint directory (default: a small policy made per env by init-model)",
    )
    parser.add_argument(
        "--env-servers",
        type=int,
        metavar="N",
        help="env servers per env (default: 2 for webarena and miniwob, whose servers each drive "
        "their browser from one thread, else 1)",
    )
    parser.add_argument(
        "--agent",
        metavar="MODULE:FUNCTION",
        help="run every episode as this agent through the rollout server's OpenAI-compatible "
        "endpoint (e.g. examples.openai_agent:agent): the endpoint soaked",
    )
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=8,
        metavar="GROUPS",
        help="groups of 4 episodes in flight at once (default 8: 32 episodes; 64: 256)",
    )
    parser.add_argument(
        "--max-growth",
        type=float,
        default=0.10,
        metavar="X",
        help="largest growth after warm-up that counts as flat (default 0.10)",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/soak"), help="logs and results")


def run(args: argparse.Namespace) -> int:
    from rich.progress import Progress, TaskID

    from agentgym_rl.experiments.soak import SoakOptions, soak_env
    from agentgym_rl.experiments.soak_figures import flat, table, write_result
    from agentgym_rl.processes.interrupt import interruptible
    from agentgym_rl.supervise.preflight import env_problems

    if args.episodes < args.every or args.every < 1:
        print("soak: --episodes must be at least --every (>= 1)", file=sys.stderr)
        return 2
    if args.max_in_flight < 1 or not 0 < args.max_growth < 1:
        print("soak: --max-in-flight must be >= 1 and --max-growth in (0, 1)", file=sys.stderr)
        return 2
    if args.env_servers is not None and args.env_servers < 1:
        print("soak: --env-servers must be at least 1", file=sys.stderr)
        return 2
    missing = {} if args.envs else {e: env_problems([e]) for e in DEFAULT_ENVS}
    wanted = args.envs or [e for e, why in missing.items() if not why]
    if not wanted:  # nothing soaked must not read as a flat soak
        why = "; ".join(p for problems in missing.values() for p in problems)
        print(f"soak: no env can run here: {why}", file=sys.stderr)
        return 2
    problems = env_problems(wanted)
    if problems:
        print("soak: " + "; ".join(problems), file=sys.stderr)
        return 2
    opts = SoakOptions(
        model=args.model,
        out=args.out,
        episodes=args.episodes,
        every=args.every,
        env_servers=args.env_servers,
        max_in_flight=args.max_in_flight,
        agent=args.agent,
    )
    results, interrupted = [], False
    # SIGTERM unwinds as Ctrl-C: the soak stops its processes and keeps its samples
    with interruptible("soak", bound_s=STOP_S) as stop:
        try:
            with Progress(transient=True) as bar:
                for env in wanted:
                    task = bar.add_task(f"soak {env}", total=args.episodes)

                    def advance(done: int, _total: int, task: TaskID = task) -> None:
                        bar.update(task, completed=max(done, 0))

                    result = soak_env(env, opts, advance)
                    write_result(result, args.out)
                    results.append(result)
                    _report(result, agent=args.agent is not None)
                    if result.stopped:
                        break
        except KeyboardInterrupt:  # before an env's first sample: nothing to keep
            interrupted = True
            print("soak: stopped before the first sample", file=sys.stderr)
    print(table(results))
    grew = [
        f"{r.env} {x}"
        for r in results
        for x in flat(r.samples, opts.capacity, args.max_growth, r.at_rest_fds, r.at_rest_tasks)
    ]
    for line in grew:
        print(f"grew: {line}")
    limit = f"{args.max_growth:.0%}"
    print(
        f"flat: every figure within {limit} of its level after warm-up" if not grew else "NOT flat"
    )
    print(
        f"settings: {opts.group_size} episodes per group, {opts.max_in_flight} groups in flight, "
        f"{opts.turn_cap} turns, {opts.max_tokens_per_turn} tokens per turn, "
        f"model: {args.model or 'a small init-model policy per env'}"
        + (f", agent: {args.agent} through the endpoint" if args.agent else "")
    )
    if interrupted or (results and results[-1].stopped):
        return stop.exit_code or 130
    return 1 if grew else 0


def _report(result: SoakResult, *, agent: bool) -> None:
    from agentgym_rl.experiments.soak_figures import ROLLOUT

    rate = result.episodes / max(result.seconds, 1e-9)
    stopped = " (stopped early)" if result.stopped else ""
    # an agent steps its env over HTTP itself: the rollout server counts no env steps then
    steps = "" if agent else f"{result.env_steps:,} env steps, "
    print(
        f"{result.env}: {result.episodes:,} episodes in {result.seconds / 60:.1f} min "
        f"({rate:.1f}/s), {steps}{result.groups_received:,} groups received{stopped}"
    )
    for process, (before, after) in result.at_rest_fds.items():
        when = ("after its first mark", "at the end") if process == ROLLOUT else ("before", "after")
        print(f"{result.env} {process}: {before} open fds at rest {when[0]}, {after} {when[1]}")
    for process, (before, after) in result.at_rest_tasks.items():
        print(
            f"{result.env} {process}: {before} asyncio tasks at rest after its first mark, {after} at the end"
        )
