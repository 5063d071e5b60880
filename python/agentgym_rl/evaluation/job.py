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

import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, get_args

from agentgym_rl import _core
from agentgym_rl.config.rollout import (
    DEFAULT_TURN_CAPS,
    ActionFormat,
    EngineConfig,
    ToolParser,
    http_dialect,
)
from agentgym_rl.config.startup import context_misfit, turn_misfit
from agentgym_rl.episode.actions import env_format
from agentgym_rl.episode.dataset import DatasetError, Task, load_split
from agentgym_rl.episode.scoring import EvalRecord, EvalReport, summarize
from agentgym_rl.episode.tools import tool_reader
from agentgym_rl.episode.types import Engine, EnvSpec
from agentgym_rl.episode.yardsticks import YARDSTICKS_FILE, yardsticks
from agentgym_rl.evaluation.runner import EvalError, EvalSettings, Policy, run_episodes
from agentgym_rl.processes.env_servers import LocalEnvServers, options_for
from agentgym_rl.trajectory import ChatTokenizer


@dataclass
class EvalOptions:
    """What to evaluate, on which tasks, and how (mirrors `agentgym-rl eval`'s flags)."""

    split: Path | tuple[Path, ...]
    """One split, or several evaluated together (a table row per env and category)."""
    model: Path | None = None
    """Local HF checkpoint (tokenizer + chat template included), run through vLLM."""
    api_base: str | None = None
    """OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (instead of `model`)."""
    api_model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    env_addresses: dict[str, list[str]] = field(default_factory=dict)
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Sampling and context options: the local engine's (all of them) or the API's requests
    (temperature, top-p, tokens per turn)."""
    n: int = 1
    turn_cap: int = DEFAULT_TURN_CAPS[-1]
    limit: int | None = None
    out: Path | None = None
    concurrency: int = 32
    success_threshold: float | None = None
    progress: bool = True
    system_prompt: str | Mapping[str, str] | None = None
    """Overrides the env's own system prompt (use the one the policy was trained with); a
    mapping gives each env its own."""
    env_options: tuple[str, ...] = ()
    """`KEY=VALUE` options of env servers eval starts itself (e.g. observation=compact);
    `ENV:KEY=VALUE` for one env's servers only."""
    action_format: str | Mapping[str, str] | None = None
    """Every env's action format (`react`, `tags`, `webarena`, `tools`), a mapping giving each
    env its own, or None: the format each env declares."""
    tool_parser: str | Mapping[str, str] = "auto"
    """Tool mode, local model: how a reply writes a call (`hermes`, `llama3`, `mistral`; `auto`:
    recognised from the chat template). An API's calls come structured (`tool_calls`)."""
    tool_calls_per_turn: int | Mapping[str, int] = 1
    """Tool mode: calls of one reply that are executed (the rest are answered "not executed")."""
    yardsticks: bool = True
    """Show chance (the env's random valid actions) and its scripted rule beside the policy, per
    category, played in this process on the same tasks and turn cap (`episode/yardsticks.py`;
    kept in `out`'s `yardsticks.json`)."""

    def check(self, engine_given: bool = False) -> None:
        """Raise `EvalError` naming the flag and the fix for inconsistent options."""
        sources = [engine_given, self.model is not None, self.api_base is not None]
        if sum(sources) != 1:
            raise EvalError("give exactly one of --model DIR or --api-base URL (with --api-model)")
        if self.api_base is not None and not self.api_model:
            raise EvalError("--api-base needs --api-model NAME (the served model's name)")
        if self.model is not None and not (self.model / "config.json").is_file():
            raise EvalError(
                f"--model {self.model}: not a local HF checkpoint (no config.json); "
                "create one with agentgym-rl init-model or pass a downloaded checkpoint folder"
            )
        for flag, value in (("n", self.n), ("turn-cap", self.turn_cap)):
            if value < 1:
                raise EvalError(f"--{flag} must be >= 1 (got {value})")
        if self.concurrency < 1:
            raise EvalError(f"--concurrency must be >= 1 (got {self.concurrency})")
        if self.limit is not None and self.limit < 1:
            raise EvalError(f"--limit must be >= 1 (got {self.limit})")
        _check_choices("--action-format", self.action_format, [f.value for f in ActionFormat])
        _check_choices("--tool-parser", self.tool_parser, list(get_args(ToolParser)))
        calls = self.tool_calls_per_turn
        for value in calls.values() if isinstance(calls, Mapping) else [calls]:
            if value < 1:
                raise EvalError(f"--tool-calls-per-turn must be >= 1 (got {value})")
        context = self.engine.max_model_len
        if self.model is not None:
            misfit = context_misfit(self.model, context, "--max-model-len")
            if misfit:
                raise EvalError(f"{misfit}, or leave it out (the model's own is the default)")
        turn = turn_misfit(
            self.model,
            context,
            self.engine.max_tokens_per_turn,
            "--max-tokens-per-turn",
            "--max-model-len",
        )
        if turn:
            raise EvalError(turn)

    def tasks(self) -> list[Task]:
        splits = self.split if isinstance(self.split, tuple) else (self.split,)
        tasks: list[Task] = []
        for split in splits:
            env, named, name = str(split).partition("=")  # ENV=NAME: a split ENV declares
            try:
                loaded = load_split(name, env) if named else load_split(split)
            except DatasetError as e:
                raise EvalError(f"--split: {e}") from None
            tasks += loaded[: self.limit] if self.limit is not None else loaded
        return tasks


def env_specs(
    envs: list[str],
    system_prompt: str | Mapping[str, str] | None = None,
    *,
    action_format: str | Mapping[str, str] | None = None,
    tool_parser: str | Mapping[str, str] = "auto",
    tool_calls_per_turn: int | Mapping[str, int] = 1,
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
        specs[env] = EnvSpec(fmt, _of_env(system_prompt, env, None), tools=tools)
    return specs


T = TypeVar("T")


def _of_env(value: T | Mapping[str, T], env: str, default: T) -> T:
    """`value` when it is one for every env, else the mapping's entry for `env` (or `default`)."""
    if isinstance(value, Mapping):
        return value.get(env, default)
    return value


def _check_choices(flag: str, value: str | Mapping[str, str] | None, choices: list[str]) -> None:
    for given in value.values() if isinstance(value, Mapping) else [value]:
        if given is not None and given not in choices:
            raise EvalError(f"{flag} {given!r}: expected one of {', '.join(choices)}")


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
    tasks = options.tasks()
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
        records = await _run(options, settings, tasks, env_pool(addresses), engine)
        elapsed = time.monotonic() - t0
    finally:
        if servers is not None:
            servers.stop()
    meta: dict[str, Any] = {
        "policy": str(options.model) if options.model else options.api_model or "engine",
        "split": _jsonable(options.split),
        "tasks": len(tasks),
        "seconds": round(elapsed, 1),
        "options": _jsonable(asdict(options)),
    }
    report = summarize(records, meta)
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


def _jsonable(value: Any) -> Any:
    if isinstance(value, EngineConfig):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value) if isinstance(value, Path) else value


async def _run(
    options: EvalOptions,
    settings: EvalSettings,
    tasks: list[Task],
    pool: _core.EnvPool,
    engine: Engine | None,
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
        with EvalProgress(len(tasks) * settings.n, enabled=options.progress) as bar:
            return await run_episodes(policy, tasks, settings, run_id=run_id, on_episode=bar.add)
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


async def start_engine(options: EvalOptions) -> Engine:
    """The vLLM engine of `options.model` (one sequence slot per concurrent episode)."""
    from agentgym_rl.inference.engine import EngineOptions, VllmEngine

    assert options.model is not None
    opts = EngineOptions.from_config(options.engine, max_num_seqs=max(options.concurrency, 1))
    return await VllmEngine.start(options.model, opts)


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
