"""Evaluating policies: `agentgym-rl eval` and the Python API's `evaluate` and `play`.

- `runner`: every task `n` times through a `Policy`, bounded concurrency.
- `policies`: the training agent loop on a vLLM engine; an OpenAI-compatible chat endpoint.
- `tool_calls`: tool mode of the text policies (an API's `tools` / `tool_calls`).
- `job`: the whole evaluation, the coroutine `run_evaluation(EvalOptions)` the CLI runs.
- `blocking`: `evaluate(...)`, the same as a synchronous call (the public one).
- `episodes`: `play(policy, tasks)`, episodes with any policy.
- `from_run`: the options of `eval --run RUN_DIR`: a run's checkpoint, its own settings.
- `progress`: the progress bar of a running evaluation.
- `turn_caps`: one policy at several turn caps on one engine (`eval --turn-cap A --turn-cap B`).
- `goal_probe`: first-turn probes of a BabyAI policy: does it read its goal.

Its options are `config/evaluate.py`'s `EvalOptions`.

Avg@n / Pass@n (`summarize`, `EvalReport`) live in the episode layer (`episode/scoring.py`),
which the rollout server's held-out evaluation shares; they are re-exported here as part of
the evaluation API. Heavy stacks (vLLM, httpx) are imported by the modules that need them.
"""

from __future__ import annotations

from agentgym_rl.config.evaluate import EvalError, EvalOptions
from agentgym_rl.episode.scoring import EvalRecord, EvalReport, Row, avg_pass, summarize
from agentgym_rl.evaluation.blocking import evaluate
from agentgym_rl.evaluation.job import run_evaluation
from agentgym_rl.evaluation.runner import EvalSettings

__all__ = [
    "EvalError",
    "EvalOptions",
    "EvalRecord",
    "EvalReport",
    "EvalSettings",
    "Row",
    "avg_pass",
    "evaluate",
    "run_evaluation",
    "summarize",
]
