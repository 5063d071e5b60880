"""Typed options of one evaluation (torch-free: pydantic only): `agentgym-rl eval`'s flags are
made from `EvalOptions` (`config/flags.py`), the Python API and `eval --run` build the same model.

Contract: `EvalOptions` validates each value alone (bounds, choices, `ENV=ADDR` addresses) and
raises pydantic's error, which the command line reports as the flag's (`--n: Input should be
greater than or equal to 1`); `check()` then refuses combinations with `EvalError` naming the
flag and the fix (one policy source, a split, a context that fits the model). A per-env mapping
(`system_prompt`, `action_format`, ...) is for configs and the API; its flag gives one value for
every env.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from agentgym_rl.config.base import ConfigModel
from agentgym_rl.config.rollout import (
    DEFAULT_TURN_CAPS,
    ActionFormat,
    EngineConfig,
    JudgeConfig,
    ToolParser,
)
from agentgym_rl.config.startup import context_misfit, turn_misfit


class EvalError(RuntimeError):
    """A problem no further episode can avoid (unreachable endpoint, refused key, unknown model,
    missing split, options that do not fit together): it stops the evaluation instead of being
    counted per episode."""


HistoryTurns = Annotated[int, Field(ge=1)] | Literal["full"]


class EvalOptions(ConfigModel):
    """What to evaluate, on which tasks, and how."""

    split: list[Path] = Field(default_factory=list)
    """A JSON file of {item_id, category} rows, e.g. envs/agentgym_envs/babyai/data/test.json,
    or ENV=NAME for a split ENV declares (maze=test); several: one table per env (required but
    with --run)."""
    model: Path | None = None
    """A local HF checkpoint (tokenizer and chat template included), run through vLLM."""
    adapter: Path | None = None
    """A LoRA adapter folder (PEFT: adapter_config.json and its weights, as a LoRA run's
    checkpoints hold in `adapter/`) to run on --model, its base."""
    api_base: str | None = None
    """An OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (instead of a model)."""
    api_model: str | None = None
    """The model's name at the API base."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the API key (unset: none)."""
    env_addresses: dict[str, list[str]] = Field(default_factory=dict)
    """Env servers by env, ENV=ADDR (http://HOST:PORT or tcp://HOST:PORT), repeatable; envs
    without one are started here."""
    engine: EngineConfig = EngineConfig()
    """Sampling and context: the local engine's (all of it) or the API's requests (temperature,
    top-p, tokens per turn)."""
    n: int = Field(default=1, ge=1)
    """Samples per task."""
    turn_cap: int = Field(default=DEFAULT_TURN_CAPS[-1], ge=1)
    """Turns per episode."""
    limit: int | None = Field(default=None, ge=1)
    """Only the first N tasks of each split."""
    out: Path | None = None
    """Write eval.md and eval.json here (and episodes.jsonl for `agentgym-rl show`)."""
    concurrency: int = Field(default=32, ge=1)
    """Episodes at once."""
    success_threshold: float | None = None
    """Reward above which an episode counts as a success (default: the env's own rule)."""
    judge_model: str | None = None
    """Also score every episode with a judge model (`judging/`): a local HF folder (served by
    vLLM's OpenAI server, started here), or with `judge_url` the endpoint's model name. The
    report puts the judge beside the env: agreement, confusion table, correlation."""
    judge_url: str | None = None
    """The judge's OpenAI-compatible base URL (None: serve `judge_model` here)."""
    judge_key_env: str | None = None
    """The environment variable holding the judge endpoint's API key."""
    judge_success_at: float = Field(default=0.5, gt=0.0, le=1.0)
    """A judged score at or above this is the judge's success."""
    judge_message_chars: int = Field(default=1500, ge=40)
    """The most of one message the judge reads (`JudgeConfig.message_chars`)."""
    judge_max_model_len: int = Field(default=4096, ge=256)
    """A local judge engine's context."""
    progress: bool = True
    """A progress bar."""
    yardsticks: bool = True
    """Show chance (the env's random valid actions) and its scripted rule beside the policy, per
    category, played here on the same tasks and turn cap (kept in the output's
    yardsticks.json)."""
    system_prompt: str | dict[str, str] | None = None
    """The system prompt (default: the env's own; give the one the policy was trained with)."""
    env_options: list[str] = Field(default_factory=list)
    """KEY=VALUE options of the env servers started here, e.g. observation=compact (ENV:KEY=VALUE
    for one env's), repeatable."""
    action_format: ActionFormat | dict[str, ActionFormat] | None = None
    """How actions are written (default: each env's own). tools: native tool calls, the env's
    tools offered as `tools`; an API answers with `tool_calls` and gets the results as `role:
    tool` messages, a local model calls them in its chat template's layout."""
    tool_parser: ToolParser | dict[str, ToolParser] = "auto"
    """In tool mode, with a local model: how a reply writes a call (auto: recognised from its
    chat template; an API's calls come structured)."""
    tool_calls_per_turn: Annotated[int, Field(ge=1)] | dict[str, Annotated[int, Field(ge=1)]] = 1
    """In tool mode: calls of one reply that are executed (the rest are answered 'not
    executed')."""
    history_turns: HistoryTurns | dict[str, HistoryTurns] = "full"
    """Turns each prompt keeps: full (the whole history) or k, the last k turns after the first
    observation (give what the policy was trained with: the env's `context.history_turns`)."""

    @field_validator("split", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return [value] if isinstance(value, str | Path) else value

    @field_validator("env_addresses", mode="before")
    @classmethod
    def _addresses(cls, value: Any) -> Any:
        """The flag's `ENV=ADDR` strings, grouped by env."""
        if not isinstance(value, list | tuple):
            return value
        grouped: dict[str, list[str]] = {}
        for item in value:
            env, sep, address = str(item).partition("=")
            if not sep or not env or "://" not in address:
                raise ValueError(f"{item!r}: expected ENV=ADDR, e.g. babyai=http://127.0.0.1:36001")
            grouped.setdefault(env, []).append(address)
        return grouped

    @property
    def judge(self) -> JudgeConfig | None:
        """The judge these options name (one call per episode), or None."""
        if self.judge_model is None:
            if self.judge_url is not None or self.judge_key_env is not None:
                raise EvalError("--judge-url and --judge-key-env need --judge-model")
            return None
        return JudgeConfig(
            model=self.judge_model,
            url=self.judge_url,
            key_env=self.judge_key_env,
            message_chars=self.judge_message_chars,
            max_model_len=self.judge_max_model_len,
            max_in_flight=min(self.concurrency, 8),
        )

    def check(self, engine_given: bool = False) -> None:
        """Raise `EvalError` naming the flag and the fix for options that do not fit together
        (`engine_given`: the caller brings its own engine instead of a model or an API)."""
        sources = [engine_given, self.model is not None, self.api_base is not None]
        if sum(sources) != 1:
            raise EvalError("give exactly one of --model DIR or --api-base URL (with --api-model)")
        if not self.split:
            raise EvalError("--split is required (or --run RUN_DIR: the run's held-out split)")
        if self.api_base is not None and not self.api_model:
            raise EvalError("--api-base needs --api-model NAME (the served model's name)")
        judge = self.judge
        if (
            judge is not None
            and judge.url is None
            and not (Path(judge.model) / "config.json").is_file()
        ):
            raise EvalError(
                f"--judge-model {judge.model}: not a local HF checkpoint (no config.json); "
                "or give the endpoint serving it with --judge-url"
            )
        if self.model is not None and not (self.model / "config.json").is_file():
            raise EvalError(
                f"--model {self.model}: not a local HF checkpoint (no config.json); "
                "create one with agentgym-rl init-model or pass a downloaded checkpoint folder"
            )
        if self.adapter is not None:
            if self.model is None:
                raise EvalError("--adapter needs --model BASE (the model it was trained on)")
            if not (self.adapter / "adapter_config.json").is_file():
                raise EvalError(
                    f"--adapter {self.adapter}: no adapter_config.json there (a LoRA run's "
                    "checkpoints hold one in step_<n>/adapter)"
                )
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


__all__ = ["EvalError", "EvalOptions"]
