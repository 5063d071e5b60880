"""Evaluating policies and inspecting episodes: `agentgym-rl eval` and `agentgym-rl show`.

- `report`: Avg@n / Pass@n per env and category from plain episode records (pure).
- `runner`: every task `n` times through a `Policy`, bounded concurrency.
- `policies`: the training agent loop on a vLLM engine; an OpenAI-compatible chat endpoint.
- `servers`: env servers started by an evaluation itself.
- `job`: `evaluate(EvalOptions)`, the whole evaluation (the CLI's Python API).
- `transcript`: one logged episode as a transcript with its loss mask visible.

Heavy stacks (vLLM, httpx) are imported by the modules that need them, not here.
"""

from __future__ import annotations

from agentgym_rl.evaluation.report import EvalRecord, EvalReport, Row, avg_pass, summarize
from agentgym_rl.evaluation.runner import EvalError, EvalSettings

__all__ = [
    "EvalError",
    "EvalOptions",
    "EvalRecord",
    "EvalReport",
    "EvalSettings",
    "Row",
    "avg_pass",
    "evaluate",
    "summarize",
]


def __getattr__(name: str) -> object:
    # `evaluate` pulls in the env pool and rollout stack; keep `import agentgym_rl.evaluation`
    # cheap for the rollout server, which only needs `summarize`.
    if name in ("evaluate", "EvalOptions"):
        from agentgym_rl.evaluation import job

        return getattr(job, name)
    raise AttributeError(name)
