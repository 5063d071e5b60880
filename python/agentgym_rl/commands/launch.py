"""`agentgym-rl launch`: the same train config as a job on a SLURM or Ray cluster.

Only argparse runs at parse time. Exit codes: 0 submitted (or written, with --dry-run), 2 a bad
config or a scheduler that refused the job (nothing was submitted).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "launch"
HELP = "submit a train config to a cluster: a SLURM batch job or a Ray job"
CHILDREN = ""  # what it submits must outlive it (ownership.unowned_env)
DESCRIPTION = (
    "Takes the run `train` would run on one machine to a cluster, as the config's `cluster:` "
    "section places it (nodes and GPUs per role). --slurm writes RUN_DIR/launch/job.sbatch (a "
    "heterogeneous job, a component per role) and submits it with sbatch; --ray ADDRESS submits "
    "a Ray job whose driver places one actor per process. Inside the job, every process finds "
    "the others from the scheduler; the run is supervised as `train` supervises it, checkpoints "
    "before a time limit and requeues (SLURM). Follow it with `agentgym-rl status RUN_DIR`. "
    "See docs/split-clusters.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--slurm", action="store_true", help="submit a SLURM batch job")
    where.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="submit a Ray job to this cluster's dashboard (e.g. http://head:8265)",
    )
    parser.add_argument("config", type=Path, help="train YAML with a cluster: section")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check the config and write the script, but submit nothing",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="override a config value by its key path, e.g. cluster.slurm.partition=gpu",
    )


def run(args: argparse.Namespace) -> int:
    from agentgym_rl.cluster.launch import PlanError, SubmitError, launch_ray, launch_slurm
    from agentgym_rl.config.loader import ConfigError
    from agentgym_rl.config.train import TrainConfig

    try:
        train = TrainConfig.from_yaml(args.config, args.overrides)
        if args.slurm:
            done = launch_slurm(train, dry_run=args.dry_run)
        else:
            done = launch_ray(train, args.ray, dry_run=args.dry_run)
    except (ConfigError, PlanError, SubmitError) as e:
        print(f"launch: {e}", file=sys.stderr)
        return 2
    if done.job_id is None:
        print(f"launch: wrote {done.script} (dry run: nothing submitted)")
        return 0
    stop = f"scancel {done.job_id}" if args.slurm else f"ray job stop {done.job_id}"
    print(
        f"launch: submitted {done.scheduler} job {done.job_id} ({done.script})\n"
        f"  follow: agentgym-rl status {done.run_dir}\n"
        f"  stop:   {stop}"
    )
    return 0
