"""Experiments on whole runs, beside the run's own lifecycle (`supervise`): `soak` (long runs
that must not grow; `soak_figures` measures and judges them), `chaos` (faults injected into a
`train` run, then `--resume`) and `compare` (the asynchronous loop against the reference's
synchronous regime, its figures in `regimes`); and the analyses across runs: `bands` (seeds of
one schedule as a mean and a band, `plot --group`) and `cap_curves` (success against the
test-time turn cap)."""
