"""Running a training run on a cluster: SLURM jobs, Ray actors."""
