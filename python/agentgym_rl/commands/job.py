"""`agentgym-rl job`: a launched run's processes, started from inside its job.

The scripts `launch` writes end with this command; users rarely type it. Exit codes are
`train`'s: 0 finished, 1 a process crashed, 2 the job could not start, 130/138/143 stopped by
SIGINT / the time-limit warning (SIGUSR1) / SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "job"
HELP = "run a launched job's processes from inside its allocation (launch's scripts call it)"
CHILDREN = "the run's processes of this node (env servers, serve-rollouts, learn under torchrun)"
DESCRIPTION = (
    "Inside a SLURM job (--slurm) or as a Ray job's driver (--ray): finds each role's nodes "
    "from the scheduler, plans the run in RUN_DIR (written by `agentgym-rl launch`) on them, "
    "starts every process there (srun steps, or one Ray actor each) and supervises them as "
    "`train` does; a run that started before is resumed."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--slurm", action="store_true", help="inside a SLURM batch job")
    where.add_argument("--ray", action="store_true", help="as a Ray job's driver")
    parser.add_argument("run_dir", type=Path, help="the run folder `launch` wrote")


def run(args: argparse.Namespace) -> int:
    from agentgym_rl.auth import SecretError
    from agentgym_rl.cluster.slurm_job import JobError, run_slurm_job
    from agentgym_rl.config.loader import ConfigError
    from agentgym_rl.supervise import PlanError

    try:
        if args.slurm:
            return run_slurm_job(args.run_dir.resolve(), say=_say)
        from agentgym_rl.cluster.ray_job import RayJobError, run_ray_job

        try:
            return run_ray_job(args.run_dir.resolve(), say=_say)
        except RayJobError as e:
            raise JobError(str(e)) from e
    except (ConfigError, PlanError, JobError, SecretError) as e:
        print(f"job: {e}", file=sys.stderr)
        return 2


def _say(line: str) -> None:
    print(line, flush=True)
