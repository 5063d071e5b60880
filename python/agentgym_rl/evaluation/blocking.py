"""The evaluation's synchronous calls for Python callers: `evaluate(...)` (the public
`agentgym_rl.evaluate`), and `run_blocking`, which runs a coroutine to its end also from code
that runs inside an event loop (a notebook): there on a thread of its own.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from agentgym_rl.config.evaluate import EvalError, EvalOptions
from agentgym_rl.config.rollout import EngineConfig
from agentgym_rl.episode.scoring import EvalReport
from agentgym_rl.evaluation.from_run import options_for_run
from agentgym_rl.evaluation.job import run_evaluation
from agentgym_rl.processes.ownership import owning

T = TypeVar("T")


def evaluate(
    model: str | Path | None = None,
    *,
    endpoint: str | None = None,
    api_model: str | None = None,
    run: str | Path | None = None,
    step: int | None = None,
    splits: str | Path | Sequence[str | Path] | None = None,
    engine: EngineConfig | None = None,
    n: int | None = None,
    turn_cap: int | None = None,
    limit: int | None = None,
    out: str | Path | None = None,
    **options: Any,
) -> EvalReport:
    """Evaluate a local checkpoint (`model`), an OpenAI-compatible `endpoint` (with
    `api_model`) or a train `run`'s checkpoint (latest, or `step`'s; its own settings, see
    `from_run.py`) on `splits`, and return the report: `rows` (Avg@n / Pass@n per env and
    category), `records` (every episode) and `meta`. Left out, `engine`, `n`, `turn_cap` and
    `limit` are the run's (with `run`) or the defaults; `options` are other `EvalOptions`
    fields (`env_addresses`, `system_prompt`, `env_options`, `concurrency`, `progress`,
    `action_format="tools"` for native tool calls...)."""
    given: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    if splits is not None:
        given["split"] = [splits] if isinstance(splits, str | Path) else list(splits)
    for key, value in (("engine", engine), ("n", n), ("turn_cap", turn_cap), ("limit", limit)):
        if value is not None:
            given[key] = value
    if out is not None:
        given["out"] = Path(out)
    if run is not None:
        if model is not None or endpoint is not None:
            raise EvalError("give one of model, endpoint or run")
        chosen = options_for_run(run, step, **given)
    else:
        if "split" not in given:
            raise EvalError("give splits (a split file, or several)")
        path = Path(model) if model is not None else None
        chosen = EvalOptions(model=path, api_base=endpoint, api_model=api_model, **given)
    with owning():  # vLLM's engine core and the env servers end with this process
        return run_blocking(run_evaluation(chosen))


def run_blocking(work: Coroutine[Any, Any, T]) -> T:
    """`work`'s result, also from code that runs inside an event loop (a notebook): there on
    a thread of its own."""
    import asyncio
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


__all__ = ["evaluate", "run_blocking"]
