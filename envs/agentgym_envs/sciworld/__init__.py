"""ScienceWorld (SciWorld): the simulator's tasks served from a bounded pool of reused JVMs;
task numbering in tasks.py, the pool in gateways.py, splits in data/ (make_splits.py)."""
