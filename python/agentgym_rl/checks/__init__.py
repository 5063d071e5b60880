"""Checks a user runs on their own machine from the installed wheel (no source tree needed):
`gpu_check`, the learner on one GPU (`scripts/gpu_check.sh`)."""
