"""The inference engine: `engine.py` wraps vLLM's `AsyncLLM` (generation, pausing, live weight
updates) for the rollout server and the evaluator, `worker.py` is the code that runs inside
vLLM's worker processes (the weight-loading extension and its payload). Importing this package
imports neither vLLM nor torch."""
