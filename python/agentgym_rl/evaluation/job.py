"""One evaluation from options: env servers, policy, episodes with a progress bar, report files.

Contract: `await run_evaluation(options)` loads the split or splits (all tasks of each, in
order; optionally the first `limit` of each),
connects to the env servers given in `env_addresses` and starts the missing ones itself, builds
the policy (a local HF checkpoint through vLLM running the training agent loop, an engine passed
in as `engine`, or an OpenAI-compatible endpoint), runs every task `n` times, and returns the
`EvalReport`. With `out`, it writes `eval.md` and `eval.json` there (and, for the token-level
path, `episodes.jsonl` for `agentgym-rl show`). Whatever it started (vLLM, env servers, HTTP
client, env pool) is stopped before it returns. Bad options raise `EvalError` before anything
starts. With an `engine` passed in, that engine's own sampling options apply (temperature...).
`action_format` puts envs in another action format than their own, e.g. `tools` (native tool
calls): an API gets each env's tools as `tools` and answers with `tool_calls`; a local model gets
them through its chat template, its calls read in the layout `tool_parser` names (`auto`: the
template's own), as training reads them.
`blocking.evaluate(...)` is the same from keyword arguments, synchronously: the public
`agentgym_rl.evaluate`.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from agentgym_rl import _core
from agentgym_rl.config.evaluate import EvalError, EvalOptions
from agentgym_rl.config.rollout import ActionFormat, http_dialect
from agentgym_rl.episode.actions import env_format
from agentgym_rl.episode.dataset import DatasetError, Task, load_split
from agentgym_rl.episode.scoring import EvalRecord, EvalReport, summarize
from agentgym_rl.episode.tools import tool_reader
from agentgym_rl.episode.types import Engine, EnvSpec
from agentgym_rl.episode.yardsticks import YARDSTICKS_FILE, yardsticks
from agentgym_rl.evaluation.runner import EvalSettings, Policy, run_episodes
from agentgym_rl.judging.serving import served_judge
from agentgym_rl.processes.env_servers import LocalEnvServers, options_for
from agentgym_rl.trajectory import ChatTokenizer


def load_tasks(options: EvalOptions) -> list[Task]:
    """Every task of each split of `options` (the first `limit` of each), in order."""
    tasks: list[Task] = []
    for split in options.split:
        env, named, name = str(split).partition("=")  # ENV=NAME: a split ENV declares
        try:
            loaded = load_split(name, env) if named else load_split(split)
        except DatasetError as e:
            raise EvalError(f"--split: {e}") from None
        tasks += loaded[: options.limit] if options.limit is not None else loaded
    return tasks


def env_specs(
    envs: list[str],
    system_prompt: str | Mapping[str, str] | None = None,
    *,
    action_format: str | Mapping[str, str] | None = None,
    tool_parser: str | Mapping[str, str] = "auto",
    tool_calls_per_turn: int | Mapping[str, int] = 1,
    history_turns: int | str | Mapping[str, int | str] = "full",
    chat: ChatTokenizer | None = None,
) -> dict[str, EnvSpec]:
    """Each env's action format (`action_format`'s for it, else its own), system prompt
    (`system_prompt`'s for it) and, in tool mode, its tools: read through `chat`'s template
    family (`tool_parser`), or without a chat (a text policy) in the parser's layout, Hermes
    for `auto`. An env whose tools are unknown here raises `EvalError`."""
    specs = {}
    for env in envs:
        fmt = ActionFormat(_of_env(action_format, env, None) or env_format(env))
        tools = None
        if fmt is ActionFormat.TOOLS:
            parser = _of_env(tool_parser, env, "auto")
            calls = _of_env(tool_calls_per_turn, env, 1)
            try:
                tools = (
                    tool_reader(env, chat, parser, calls)
                    if chat is not None
                    else tool_reader(env, None, parser, calls)
                )
            except ValueError as e:
                raise EvalError(f"--action-format tools: {e}") from None
        window = (
            history_turns.get(env, "full") if isinstance(history_turns, Mapping) else history_turns
        )
        specs[env] = EnvSpec(
            fmt,
            _of_env(system_prompt, env, None),
            tools=tools,
            history_turns=None if window == "full" else int(window),
        )
    return specs


T = TypeVar("T")


def _of_env(value: T | Mapping[str, T], env: str, default: T) -> T:
    """`value` when it is one for every env, else the mapping's entry for `env` (or `default`)."""
    if isinstance(value, Mapping):
        return value.get(env, default)
    return value


def env_pool(addresses: dict[str, list[str]]) -> _core.EnvPool:
    servers = [
        _core.EnvServer(env, a, dialect=http_dialect(env))
        for env, addrs in addresses.items()
        for a in addrs
    ]
    return _core.EnvPool(servers, step_timeout_s=120.0)


async def run_evaluation(options: EvalOptions, *, engine: Engine | None = None) -> EvalReport:
    """Run the evaluation described by `options`; see the module docstring."""
    import asyncio

    options.check(engine_given=engine is not None)
    settings = EvalSettings(
        n=options.n,
        turn_cap=options.turn_cap,
        concurrency=options.concurrency,
        success_threshold=options.success_threshold,
    )
    tasks = load_tasks(options)
    _check_tool_mode(options, tasks)
    envs = sorted({t.env for t in tasks})
    missing = [e for e in envs if not options.env_addresses.get(e)]
    log_dir = options.out or Path("runs/eval")
    servers = None
    if missing:
        servers = await asyncio.to_thread(
            partial(LocalEnvServers.start, missing, log_dir, env_options=options.env_options)
        )
    try:
        addresses = {e: options.env_addresses[e] for e in envs if e not in missing}
        addresses.update(servers.addresses() if servers else {})
        t0 = time.monotonic()
        judged: dict[str, Any] = {}  # the judge's counters, when one scored the episodes
        records = await _run(options, settings, tasks, env_pool(addresses), engine, judged)
        elapsed = time.monotonic() - t0
    finally:
        if servers is not None:
            servers.stop()
    meta: dict[str, Any] = {
        "policy": str(options.model) if options.model else options.api_model or "engine",
        # one split as its path, several as a list (eval.json's format since its first version)
        "split": splits[0] if len(splits := [str(p) for p in options.split]) == 1 else splits,
        "tasks": len(tasks),
        "seconds": round(elapsed, 1),
        "options": options.model_dump(mode="json"),
        **({"judge": judged} if judged else {}),
    }
    report = summarize(records, meta)
    if options.judge is not None:
        report.judge_success_at = options.judge_success_at
    if options.yardsticks:
        report.yardsticks = await asyncio.to_thread(_yardsticks, options, tasks)
    if options.out is not None:
        report.write(options.out)
    return report


def _yardsticks(options: EvalOptions, tasks: list[Task]) -> dict[str, dict[str, Any]]:
    """Chance and rule of each env of `tasks` at the evaluation's turn cap and env options."""
    envs = dict.fromkeys(t.env for t in tasks)
    pairs = {e: (o.partition("=") for o in options_for(options.env_options, e)) for e in envs}
    env_options = {e: {k: v for k, _, v in kv} for e, kv in pairs.items()}
    cache = options.out / YARDSTICKS_FILE if options.out is not None else None
    return yardsticks(tasks, dict.fromkeys(envs, options.turn_cap), env_options, cache=cache)


async def _run(
    options: EvalOptions,
    settings: EvalSettings,
    tasks: list[Task],
    pool: _core.EnvPool,
    engine: Engine | None,
    judged: dict[str, Any],
) -> list[EvalRecord]:
    from agentgym_rl.evaluation.progress import EvalProgress

    run_id = f"eval-{uuid.uuid4().hex[:8]}"  # request ids stay unique on a shared engine
    started: Any = None  # an engine this call started (and stops)
    policy: Policy | None = None
    try:
        if options.api_base is not None:
            policy = await _api_policy(options, pool, tasks)
        else:
            if engine is None:
                started = engine = await start_engine(options)
            policy = _agent_policy(options, engine, pool, tasks)
        config, out = options.judge, options.out or Path("runs/eval")
        judging = served_judge(config, out) if config else contextlib.nullcontext(None)
        async with judging as judge:
            with EvalProgress(len(tasks) * settings.n, enabled=options.progress) as bar:
                records = await run_episodes(
                    policy, tasks, settings, run_id=run_id, on_episode=bar.add, judge=judge
                )
            if judge is not None:
                judged.update(judge.counters.snapshot())
            return records
    finally:
        if policy is not None:
            await policy.aclose()
        await pool.shutdown()
        if started is not None:
            started.shutdown()


def _specs(
    options: EvalOptions, tasks: list[Task], chat: ChatTokenizer | None = None
) -> dict[str, EnvSpec]:
    return env_specs(
        sorted({t.env for t in tasks}),
        options.system_prompt,
        action_format=options.action_format,
        tool_parser=options.tool_parser,
        tool_calls_per_turn=options.tool_calls_per_turn,
        history_turns=options.history_turns,
        chat=chat,
    )


def _check_tool_mode(options: EvalOptions, tasks: list[Task]) -> None:
    """Tool mode's problems (an env without known tools, a chat template that cannot render
    tools) as an `EvalError` before anything starts."""
    given = options.action_format
    if ActionFormat.TOOLS.value not in (given.values() if isinstance(given, Mapping) else [given]):
        return
    _specs(options, tasks)
    if options.model is not None:
        _specs(options, tasks, ChatTokenizer.from_dir(options.model))


async def _api_policy(options: EvalOptions, pool: _core.EnvPool, tasks: list[Task]) -> Policy:
    from agentgym_rl.evaluation.policies import ApiSettings, ChatApiPolicy

    assert options.api_base is not None and options.api_model is not None
    api = ApiSettings(
        base_url=options.api_base,
        model=options.api_model,
        api_key=os.environ.get(options.api_key_env) or None,
        temperature=options.engine.temperature,
        top_p=options.engine.top_p,
        max_tokens=options.engine.max_tokens_per_turn,
    )
    policy = ChatApiPolicy(pool, api, _specs(options, tasks))
    try:
        await policy.check()
    except BaseException:
        await policy.aclose()
        raise
    return policy


def adapter_rank(folder: Path) -> int:
    import json

    return int(json.loads((folder / "adapter_config.json").read_text())["r"])


async def start_engine(options: EvalOptions) -> Engine:
    """The vLLM engine of `options.model` (one sequence slot per concurrent episode)."""
    from agentgym_rl.inference.engine import VllmEngine
    from agentgym_rl.inference.kv_cache import sized_options

    assert options.model is not None
    slots = max(options.concurrency, 1)
    opts = sized_options(options.engine, options.model, slots, max_num_seqs=slots)
    if options.adapter is None:
        return await VllmEngine.start(options.model, opts)
    rank = adapter_rank(options.adapter)
    # a PEFT folder as it is (B unscaled, alpha in its config): vLLM serves it
    adapter_opts = replace(opts, max_lora_rank=rank, lora_serving="adapters")
    engine = await VllmEngine.start(options.model, adapter_opts)
    engine.serve_adapter(options.adapter)
    return engine


def _agent_policy(
    options: EvalOptions, engine: Engine, pool: _core.EnvPool, tasks: list[Task]
) -> Policy:
    from agentgym_rl.episode.agent import AgentLoop
    from agentgym_rl.episode.log import EPISODES_FILE, EpisodeLog
    from agentgym_rl.evaluation.policies import AgentPolicy

    model_dir = Path(getattr(engine, "model_dir", options.model or ""))
    # An engine's context may be shorter; one that does not say leaves the limit to itself.
    engine_len = getattr(getattr(engine, "options", None), "max_model_len", None)
    given = options.engine.max_model_len
    max_len = min((n for n in (given, engine_len) if n), default=1 << 30)
    chat = ChatTokenizer.from_dir(model_dir)
    agent = AgentLoop(
        engine,
        pool,
        chat,
        envs=_specs(options, tasks, chat),
        max_model_len=max_len,
        max_tokens_per_turn=min(options.engine.max_tokens_per_turn, max_len - 1),
        stop_ids=getattr(engine, "stop_token_ids", None),
        check_drift=False,  # eval trains on nothing; the full re-render would only cost time
    )
    log = None
    if options.out is not None:
        (options.out / EPISODES_FILE).unlink(missing_ok=True)  # this evaluation's episodes only
        log = EpisodeLog.in_dir(options.out, every=1, tokenizer=str(model_dir.resolve()))
    return AgentPolicy(agent, episode_log=log)
