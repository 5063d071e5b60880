"""Episodes with any policy, from Python: `agentgym_rl.play(policy, tasks)`.

Contract: `play(policy, tasks)` plays every task `n` times through the env pool and the
episode layer training uses (the env's prompts, action parsing, rewards and statuses) and
returns one `Episode` per play, in (task, sample) order, with its chat messages. `policy` is a
function of the messages so far that returns the assistant's reply (a plain or a coroutine
function), or an OpenAI-compatible base URL (then `model` names the served model). `tasks` are
item ids (`"babyai_17"`), `Task`s, or the path of a split file. Env servers missing from
`env_addresses` are started for the call (`env_options` as `env serve --env-option` takes them)
and stopped after it. For data generation, debugging an env, or baselines; synchronous, also
from a notebook whose event loop runs. `action_format="tools"` plays every env in tool mode: an
endpoint gets the env's tools as `tools` and answers with `tool_calls`; a function may return
such a message, or text whose calls are read in `tool_parser`'s layout (Hermes for `auto`).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from agentgym_rl.episode.dataset import Task, load_split, parse_item_id
from agentgym_rl.episode.outcome import is_success
from agentgym_rl.evaluation.blocking import run_blocking
from agentgym_rl.evaluation.job import env_pool, env_specs
from agentgym_rl.evaluation.policies import ApiSettings, ChatApiPolicy, FunctionPolicy
from agentgym_rl.evaluation.runner import EpisodeOutcome
from agentgym_rl.processes.env_servers import LocalEnvServers

Reply = Callable[[list[dict[str, Any]]], str | dict[str, Any] | Awaitable[str | dict[str, Any]]]
"""A policy as a function: the chat messages so far -> the assistant's next message (its text,
or in tool mode also an assistant message with `tool_calls`)."""


@dataclass(frozen=True)
class Episode:
    """One played episode."""

    task: Task
    sample: int
    reward: float
    success: bool
    status: str
    """done, turn_cap, truncated, env_failure (see `wire.types.Status`)."""
    turns: int
    messages: tuple[dict[str, Any], ...]
    """The chat messages (tool mode: assistant `tool_calls`, answered by `role: tool` ones)."""
    failure: str | None = None


def play(
    policy: Reply | str,
    tasks: Sequence[str | Task] | str | Path,
    *,
    n: int = 1,
    turn_cap: int = 20,
    model: str | None = None,
    env_addresses: Mapping[str, list[str]] | None = None,
    env_options: Sequence[str] = (),
    system_prompt: str | None = None,
    concurrency: int = 8,
    action_format: str | None = None,
    tool_parser: str = "auto",
) -> list[Episode]:
    """See the module docstring."""
    chosen = _tasks(tasks)
    if n < 1 or turn_cap < 1 or concurrency < 1:
        raise ValueError("n, turn_cap and concurrency must be >= 1")
    if isinstance(policy, str) and not model:
        raise ValueError("a policy given as an endpoint URL needs model= (the served name)")
    formats = {"action_format": action_format, "tool_parser": tool_parser}
    run = partial(_play, policy, chosen, n, turn_cap, model, system_prompt, formats, concurrency)
    envs = sorted({t.env for t in chosen})
    given = dict(env_addresses or {})
    missing = [e for e in envs if not given.get(e)]
    if not missing:
        return run_blocking(run(given))
    with tempfile.TemporaryDirectory(prefix="agentgym-rollout-") as logs:
        with LocalEnvServers.start(missing, Path(logs), env_options=env_options) as servers:
            return run_blocking(run({**given, **servers.addresses()}))


def _tasks(tasks: Sequence[str | Task] | str | Path) -> list[Task]:
    if isinstance(tasks, Path) or (isinstance(tasks, str) and tasks.endswith(".json")):
        return load_split(tasks)
    listed: list[str | Task] = [tasks] if isinstance(tasks, str) else list(tasks)
    out = []
    for task in listed:
        if isinstance(task, Task):
            out.append(task)
        else:
            env, idx = parse_item_id(str(task))
            out.append(Task(str(task), env, idx))
    if not out:
        raise ValueError("no tasks to play")
    return out


async def _play(
    policy: Reply | str,
    tasks: list[Task],
    n: int,
    turn_cap: int,
    model: str | None,
    system_prompt: str | None,
    formats: dict[str, Any],
    concurrency: int,
    addresses: dict[str, list[str]],
) -> list[Episode]:
    specs = env_specs(sorted({t.env for t in tasks}), system_prompt, **formats)
    pool = env_pool({env: addresses[env] for env in {t.env for t in tasks}})
    player: FunctionPolicy | ChatApiPolicy
    if isinstance(policy, str):
        player = ChatApiPolicy(pool, ApiSettings(base_url=policy, model=str(model)), specs)
        await player.check()
    else:
        player = FunctionPolicy(pool, policy, specs)
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task, k: int) -> Episode:
        async with gate:
            rid = f"rollout-{task.item_id}-s{k}"
            out: EpisodeOutcome = await player.episode(task, turn_cap=turn_cap, request_id=rid)
        return Episode(
            task=task,
            sample=k,
            reward=out.reward,
            success=is_success(task.env, out.reward),
            status=out.status,
            turns=out.turns,
            messages=out.messages,
            failure=out.failure,
        )

    try:
        return list(await asyncio.gather(*(one(t, k) for t in tasks for k in range(n))))
    finally:
        await player.aclose()
        await pool.shutdown()


__all__ = ["Episode", "Reply", "play"]
