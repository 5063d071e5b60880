"""Typed configuration of the `serve-rollouts` process (torch-free: pydantic only).

Contract: a `RolloutConfig` that validates is internally consistent: the dataset's env has a
server entry, every endpoint is a ZeroMQ `tcp://HOST:PORT` or `ipc://PATH`, every env address
is `http://` (AgentGym HTTP) or `tcp://` (native ZeroMQ), a turn leaves room in the context, and
the ScalingInter turn caps never shrink. Defaults follow the AgentGym-RL BabyAI recipe.
`RolloutSection` is the `rollout:` section of a train config: the same settings without the
fields marked `Wired` (the model, env addresses, endpoints, log dir, and the values a train
config states once for both sides: groups per step and max staleness).
"""

from __future__ import annotations

import enum
import itertools
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from agentgym_rl.config.auth import AuthConfig
from agentgym_rl.config.base import ConfigModel, Wired
from agentgym_rl.env_discovery import env_name, env_traits

_ZMQ_ENDPOINT = re.compile(r"^(tcp://[^\s:/]+:\d{1,5}|ipc://\S+)$")
_ENV_ADDRESS = re.compile(r"^(https?|tcp)://[^\s:/]+:\d{1,5}/?$")

DEFAULT_TURN_CAPS = (6, 13, 20)
"""The paper's ScalingInter schedule; its last cap is also evaluation's default turn cap."""
GROUPS_PER_STEP = 16
"""Default groups per optimizer step (B), the same on both sides of the stream."""
MAX_STALENESS = 2
"""Default versions a group's oldest token may lag the learner (S), the same on both sides."""


class ActionFormat(str, enum.Enum):
    """How an env's action is written in the model's text (see `rollout/actions.py`)."""

    REACT = "react"
    """`Thought: ...` then `Action: <action>`; the last `Action:` line wins (BabyAI, TextCraft,
    SciWorld)."""
    TAGS = "tags"
    """Search-R1 tags: `<search>query</search>` or `<answer>text</answer>` (SearchQA)."""
    WEBARENA = "webarena"
    """A WebArena command (`click [id]`, `type [id] [text] [0|1]`, `stop [answer]`, ...),
    preferably inside a ``` fence."""
    TOOLS = "tools"
    """Native tool calls: the env's tools go to the chat template as `tools=`, the reply's call
    is parsed in the template family's layout and its result comes back as a `tool` message
    (`episode/tools/`)."""


HttpDialect = Literal["agentgym", "searchqa", "webarena"]
"""The AgentGym HTTP variants the env pool speaks (the envpool crate's `Dialect`)."""


def http_dialect(env: str) -> HttpDialect:
    """The HTTP dialect our clients speak to `env`'s servers, ours and AgentGym's alike (the
    envs' `server/PROTOCOL.md`): the one the env declares; SciWorld's extra reset fields are
    the common dialect to a client."""
    served = env_traits(env).http_dialect
    return served if served in ("searchqa", "webarena") else "agentgym"  # type: ignore[return-value]


def checked_env_name(value: str) -> str:
    """An env named by reference, `package.module:Class`, is named by its class's `name` from
    here on (the prefix of its task ids); a name is kept as given."""
    if ":" not in value:
        return value
    try:
        return env_name(value)
    except (LookupError, ImportError) as e:
        raise ValueError(str(e)) from None


EnvName = Annotated[str, Field(min_length=1), AfterValidator(checked_env_name)]
"""An env's name as `env list` shows it, or a `module:Class` reference to an env class."""


def check_zmq_endpoint(value: str) -> str:
    if not _ZMQ_ENDPOINT.match(value):
        raise ValueError(f"{value!r} is not a ZeroMQ endpoint tcp://HOST:PORT or ipc://PATH")
    return value


class EngineConfig(ConfigModel):
    """Sampling and context options of the inference engine: the one definition of these
    settings and their defaults (`inference.engine.EngineOptions.from_config` makes the engine's
    options from one; `agentgym-rl eval` builds one from its flags)."""

    temperature: float = Field(default=1.0, ge=0.0, le=10.0)
    """Sampling temperature (the paper trains and evaluates at 1.0)."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass."""
    max_model_len: int | None = Field(default=None, ge=64)
    """Context length of one episode (prompt, every turn and every observation). None: the
    model's own (`max_position_embeddings`), resolved when the engine starts. At most the
    model's own: serve-rollouts refuses a larger value at start-up."""
    max_tokens_per_turn: int = Field(default=512, ge=1)
    """Most tokens one assistant turn may generate."""
    seed: int = Field(default=0, ge=0)
    """Engine sampling seed."""
    gpu_memory_utilization: float = Field(default=0.85, gt=0.0, le=1.0)
    """Fraction of GPU memory the engine may take (vLLM)."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Engine weights/activations dtype. It must match the learner's for log-probs to agree:
    "auto" lets vLLM choose (bf16 for an fp32 checkpoint on its CPU build)."""
    kv_cache_mb: int | None = Field(default=None, ge=16)
    """The engine's KV cache on a CPU, in MiB. None: sized for the run, every episode the
    server may hold at once at `max_model_len`, within a quarter of the memory available at
    start (`inference/kv_cache.py`); on a GPU vLLM sizes it from `gpu_memory_utilization`."""
    max_lora_rank: int | None = Field(default=None, ge=1, le=512)
    """Serve the policy as LoRA adapters of at most this rank: the learner trains `learn.lora`
    and sends adapters alone (`train` sets it from `learn.lora.rank`; a split-cluster
    serve-rollouts config sets it to the learner's rank). None: full weights."""
    lora_serving: Literal["merged", "adapters"] = "merged"
    """How an engine with `max_lora_rank` generates with the adapters it receives (they stream
    alone either way). `merged`: each version is merged into the base weights in the engine's
    process and generates at the full weights' speed (vLLM's CPU build generates about 5x slower
    with a served adapter). `adapters`: vLLM serves each version as a LoRA adapter (no reload;
    on GPUs its LoRA kernels make that cheap)."""

    @model_validator(mode="after")
    def turn_fits_in_context(self) -> EngineConfig:
        """With the model's own length (None) start-up checks it (`config.startup.turn_misfit`)."""
        if self.max_model_len is not None and self.max_tokens_per_turn >= self.max_model_len:
            raise ValueError(
                f"max_tokens_per_turn ({self.max_tokens_per_turn}) must be below "
                f"max_model_len ({self.max_model_len})"
            )
        return self


class ScalingInterConfig(ConfigModel):
    """Progressive turn caps: stage = min(version // versions_per_stage, len(turn_caps) - 1)."""

    turn_caps: list[int] = Field(default_factory=lambda: list(DEFAULT_TURN_CAPS), min_length=1)
    """Turn cap of each stage, e.g. [6, 13, 20]; a fixed cap is one stage."""
    versions_per_stage: int = Field(default=100, ge=1)
    """Policy versions (learner steps) per stage (K)."""

    @model_validator(mode="before")
    @classmethod
    def renamed_stages(cls, data: Any) -> Any:
        if isinstance(data, dict) and "stages" in data:
            raise ValueError("`stages` is now `turn_caps` (the turn cap of each stage)")
        return data

    @field_validator("turn_caps")
    @classmethod
    def caps_never_shrink(cls, value: list[int]) -> list[int]:
        if any(cap < 1 for cap in value):
            raise ValueError("every turn cap must be at least 1")
        if any(b < a for a, b in itertools.pairwise(value)):
            raise ValueError(f"turn caps must not decrease: {value}")
        return value


class ContextConfig(ConfigModel):
    """What each turn's prompt holds (`episode/context.py`)."""

    history_turns: int | Literal["full"] = "full"
    """`full`: the whole history, the episode one sample (token-in/token-out across turns). k
    (>= 1): the system turn, the first observation and the last k turns (each the reply and what
    came back); every turn trains as its own sample (its prompt rendered by the chat template,
    then exactly the sampled ids), all of them with the episode's reward and in its group."""

    @field_validator("history_turns")
    @classmethod
    def at_least_one_turn(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("history_turns must be at least 1 (the last turn's observation)")
        return value

    @property
    def window(self) -> int | None:
        """The turns kept, or None for the whole history."""
        return None if self.history_turns == "full" else int(self.history_turns)


ShapingOn = Literal["each_turn", "last_turn"]
"""Which turns of an episode carry its reward shaping (`EnvSettings.shaping_on`)."""

ToolParser = Literal["auto", "hermes", "llama3", "mistral"]
"""How a reply writes a tool call (`auto`: the chat template's own family)."""


RewardSource = Literal["env", "judge", "env+judge"]
JudgeMode = Literal["episode", "group"]


class JudgeConfig(ConfigModel):
    """A judge model that scores finished episodes from their transcripts
    (`judging/`). The names are WebArena's judge options' (`judge_url`, `judge_model`,
    `judge_key_env`) without their prefix."""

    model: str = Field(min_length=1)
    """With `url`: the model name the endpoint serves. Without: a local HF folder, served by a
    vLLM engine of its own (an OpenAI-compatible server the rollout server starts and stops)."""
    url: str | None = None
    """An OpenAI-compatible base URL (`http://host:8000/v1`); None: serve `model` locally."""
    key_env: str | None = None
    """The environment variable holding the endpoint's API key (never the key itself)."""
    mode: JudgeMode = "episode"
    """`episode`: one call per episode, scored alone; `group`: one call per group, its episodes
    scored against each other (RULER's relative ranking)."""
    rubric: str | None = None
    """The judge's prompt template (None: `judging/rubric.py`'s for the mode). Per episode it
    fills `{task}`, `{transcript}`, `{reference}`; per group `{task}`, `{attempts}`, `{n}`,
    `{reference}`. The reply format is the rubric's to ask for: `SCORE: x`, or `k: x` lines."""
    guided: bool | None = None
    """Constrain replies to the score format by the server's guided decoding (vLLM's
    `structured_outputs`). None: on for a local judge, off for a `url` (an endpoint that does
    not know the field may refuse the request)."""
    message_chars: int = Field(default=1500, ge=40)
    """The most of one message (the task, a reply, an observation) the judge reads: its head
    and tail. Size it to the judge's context: a group prompt holds every episode's turns."""
    max_tokens: int = Field(default=64, ge=1)
    """The judge's reply, in tokens (a score line needs few; room for reasoning before it)."""
    temperature: float = Field(default=0.0, ge=0.0)
    """The judge's sampling temperature (0: greedy, the same transcript the same score)."""
    max_in_flight: int = Field(default=8, ge=1)
    """Judge requests open at once; the rest wait."""
    retries: int = Field(default=3, ge=0)
    """Retries of a request that failed in a way that may pass (no connection, timeout, 429,
    5xx), with exponential backoff from `backoff_s`; then the group fails, counted."""
    backoff_s: float = Field(default=1.0, ge=0.0)
    """The first retry's wait; each later one waits twice the one before."""
    timeout_s: float = Field(default=60.0, gt=0.0)
    """One judge request's time limit (a timeout is retried)."""
    dtype: str = "float32"
    """A local judge engine's dtype (`float32` on a CPU without native bf16)."""
    max_model_len: int = Field(default=4096, ge=256)
    """A local judge engine's context (prompts longer than it fail their group)."""

    @property
    def is_guided(self) -> bool:
        return self.url is None if self.guided is None else self.guided


class RewardConfig(ConfigModel):
    """Where an episode's reward comes from."""

    source: RewardSource = "env"
    """`env`: the env's score; `judge`: the judge's score in [0, 1] instead; `env+judge`: the
    env's reward scaled by `1 - judge_weight` plus the judge's by `judge_weight`."""
    judge: JudgeConfig | None = None
    """The judge (needed unless `source` is `env`)."""
    success_at: float = Field(default=0.5, gt=0.0, le=1.0)
    """`judge`: an episode succeeded when its judged score is at least this (logged beside the
    env's own success); `env+judge` keeps the env's success. Shaping (`invalid_penalty`,
    `turn_cost`) follows that success, as it follows the env's otherwise."""
    judge_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    """`env+judge`: the judge's share of the reward."""

    @model_validator(mode="after")
    def judge_when_judged(self) -> RewardConfig:
        if self.source != "env" and self.judge is None:
            raise ValueError(f"reward.source {self.source!r} needs reward.judge")
        if self.source == "env" and self.judge is not None:
            raise ValueError(
                "reward.judge is set but reward.source is 'env': say judge or env+judge"
            )
        return self


class EnvSettings(ConfigModel):
    """How one environment's servers are spoken to and its actions read."""

    env: EnvName
    """Environment name (the `item_id` prefix of its tasks, e.g. `babyai`), or a reference
    `package.module:Class` to an env class of your own."""
    dialect: HttpDialect = "agentgym"
    """HTTP dialect of the servers (ignored for tcp:// addresses). Left out: the one the env
    declares (`webarena` for the web envs, `searchqa` for Deep Search)."""
    max_inflight: int = Field(default=64, ge=1)
    """Concurrent requests per server."""
    action_format: ActionFormat = ActionFormat.REACT
    """How actions are parsed from generated text. Left out: the format the env declares."""
    system_prompt: str | None = None
    """Overrides the system prompt the env declares (or the generic one of its format)."""
    tool_parser: ToolParser = "auto"
    """With `action_format: tools`, how replies write a call: `hermes` (Qwen2.5/Qwen3
    `<tool_call>`), `llama3` (JSON), `mistral` (`[TOOL_CALLS]`); `auto` recognises it from what
    the model's chat template writes for tools."""
    tool_calls_per_turn: int = Field(default=1, ge=1)
    """With `action_format: tools`, calls of one reply that are executed, in order; the rest are
    answered "not executed" (not counted invalid)."""
    invalid_penalty: float = Field(default=0.0, ge=0.0, le=1.0)
    """Training reward of a failed episode: `-invalid_penalty x` its share of invalid turns
    (no action in the text, or an action the env refused) instead of the env's score. Successes
    keep their score, so success is still `reward > 0`; held-out evaluation reports raw scores."""
    reward_floor: float | None = None
    """Training reward of an episode is at least this (None: the env's score as it is). MiniWoB
    scores a wrong click -1 and doing nothing 0: with floor 0, a policy that is still guessing
    is not taught to stop clicking. Held-out evaluation reports raw scores."""
    turn_cost: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Training reward of a success: its score x (1 - turn_cost x turns / turn cap), as minigrid
    scores BabyAI (0.9). When every success scores the same, a refused action that a success
    repeated is reinforced as much as the one that helped, and the greedy policy loops on it
    (TextCraft); a shorter success now teaches more. Held-out evaluation reports raw scores."""
    shaping_on: ShapingOn = "each_turn"
    """Which turns carry the penalty and the turn cost in the per-turn rewards step-level credit
    reads (the episode's reward is the same either way): `each_turn` puts a refused action's
    penalty on that turn and the cost on every turn, as GiGPO's per-step rewards; `last_turn`
    puts both on the last turn (the step-credit studies before it existed)."""
    eval_split: Path | None = None
    """This env's held-out split (a file or a declared name) when `eval` is on; with one env,
    `eval.split` may say it instead."""
    scaling_inter: ScalingInterConfig | None = None
    """This env's own turn caps by policy version (None: the rollout's `scaling_inter`)."""
    context: ContextConfig = Field(default_factory=ContextConfig)
    """Step-wise context: `{history_turns: k}` keeps the last k turns in each prompt, one sample
    per turn (default `full`: the whole history, one sample per episode)."""
    reward: RewardConfig = Field(default_factory=RewardConfig)
    """Where the reward comes from: the env (default), a judge model, or both."""

    @model_validator(mode="before")
    @classmethod
    def declared_by_the_env(cls, data: Any) -> Any:
        """The dialect and action format left out are the ones the env declares."""
        if not (isinstance(data, dict) and isinstance(data.get("env"), str)):
            return data
        filled = dict(data)
        if filled.get("dialect") is None:
            filled["dialect"] = http_dialect(data["env"])
        if filled.get("action_format") is None:
            filled["action_format"] = env_traits(data["env"]).action_format
        return filled


class EnvServersConfig(EnvSettings):
    """The servers of one environment and how its actions are read."""

    addresses: Annotated[list[str], Wired("env_servers"), Field(min_length=1)]
    """`http://HOST:PORT` (AgentGym HTTP protocol) or `tcp://HOST:PORT` (native ZeroMQ)."""
    env_options: Annotated[dict[str, str], Wired("env_servers' --env-option args")] = Field(
        default_factory=dict
    )
    """The options the env's servers run with (KEY: VALUE): the held-out yardsticks play the env
    in this process with the same ones."""

    @field_validator("addresses")
    @classmethod
    def addresses_have_a_scheme(cls, value: list[str]) -> list[str]:
        for address in value:
            if not _ENV_ADDRESS.match(address):
                raise ValueError(f"{address!r} is not http://HOST:PORT or tcp://HOST:PORT")
        if len(set(value)) != len(value):
            raise ValueError("duplicate address")
        return value


class EnvPoolConfig(ConfigModel):
    """Timeouts and health checks of the env connection pool."""

    health_interval_s: float = Field(default=1.0, gt=0.0)
    """Seconds between health checks (a restarted server is noticed within this)."""
    step_timeout_s: float = Field(default=60.0, gt=0.0)
    """Deadline of one env step; past it the episode ends as an env failure."""
    reset_timeout_s: float = Field(default=30.0, gt=0.0)
    """Deadline of create and reset."""


class DatasetSource(ConfigModel):
    """One env's tasks in the dataset."""

    env: EnvName
    """Environment the split belongs to."""
    split: Path
    """A JSON file of `{"item_id": "<env>_<int>", "category"?: str}` rows, or the name of a
    split the env declares (`train`; `agentgym-rl env list -v ENV` lists them)."""
    weight: float = Field(default=1.0, gt=0.0)
    """Share of the groups drawn from this source: weight / the sum of the weights."""


class CurriculumKeep(ConfigModel):
    """The probability a drawn task is kept, by its band (each > 0: no task is never drawn)."""

    unseen: float = Field(default=1.0, gt=0.0, le=1.0)
    """Too few outcomes yet (`min_episodes`)."""
    edge: float = Field(default=1.0, gt=0.0, le=1.0)
    """Between `low` and `high`: the groups GRPO learns from."""
    unsolved: float = Field(default=0.25, gt=0.0, le=1.0)
    """Recent success at or below `low`."""
    solved: float = Field(default=0.25, gt=0.0, le=1.0)
    """Recent success at or above `high`."""


class CurriculumConfig(ConfigModel):
    """A curriculum by online difficulty (`rollout/curriculum.py`): a task whose recent episodes
    all failed or all succeeded is drawn less often (GRPO learns nothing from such a group)."""

    by: Literal["task", "category"] = "task"
    """What the recent success rate is kept for: each task, or each category of the split."""
    window: int = Field(default=16, ge=1)
    """Episodes of a key's recent success rate (the last ones finished)."""
    min_episodes: int = Field(default=4, ge=1)
    """Fewer outcomes than this: the key is `unseen` (kept as `keep.unseen` says)."""
    low: float = Field(default=0.0, ge=0.0, lt=1.0)
    """A recent success rate at or below this is `unsolved`."""
    high: float = Field(default=1.0, gt=0.0, le=1.0)
    """At or above this, `solved`; between the two, `edge`."""
    keep: CurriculumKeep = Field(default_factory=CurriculumKeep)
    """The probability a drawn task of each band is kept."""

    @model_validator(mode="after")
    def low_below_high(self) -> CurriculumConfig:
        if self.low >= self.high:
            raise ValueError(f"curriculum: low ({self.low}) must be below high ({self.high})")
        return self


class DatasetConfig(ConfigModel):
    """Where tasks come from and how often each is sampled: one env's split (`env` and `split`),
    or a mix of several (`mix`, each with a weight); the rest holds for the whole dataset."""

    mix: list[DatasetSource] = Field(min_length=1)
    """The sources; `env: E, split: S` is short for `mix: [{env: E, split: S}]`."""
    group_size: int = Field(default=8, ge=1)
    """Episodes per task (n, the GRPO group); every group is one task of one env."""
    shuffle_seed: int = Field(default=0, ge=0)
    """Seed of each source's per-epoch shuffle and of the mix's draws."""
    epochs: int | None = Field(default=None, ge=1)
    """Stop after this many passes over each split; None: run until stopped."""
    resume: bool = False
    """Continue from `<log_dir>/cursor.json` (written at exit) when it exists (and the
    curriculum from `<log_dir>/curriculum.json`)."""
    curriculum: CurriculumConfig | None = None
    """Draw tasks by their recent success (None: every task as the source orders them)."""

    @model_validator(mode="before")
    @classmethod
    def one_source_or_a_mix(cls, data: Any) -> Any:
        if isinstance(data, list):
            return {"mix": data}
        if isinstance(data, dict) and ("env" in data or "split" in data):
            if "mix" in data:
                raise ValueError("give `env` and `split` (one source) or `mix`, not both")
            rest = {k: v for k, v in data.items() if k not in ("env", "split")}
            return {**rest, "mix": [{"env": data.get("env"), "split": data.get("split")}]}
        return data

    @model_validator(mode="after")
    def each_env_once(self) -> DatasetConfig:
        if len(set(self.envs)) != len(self.envs):
            raise ValueError(f"mix lists an environment twice: {self.envs}")
        return self

    @property
    def envs(self) -> list[str]:
        """The envs of the dataset, in the mix's order."""
        return [source.env for source in self.mix]


class BufferSettings(ConfigModel):
    """Trajectory buffer: bounded memory (in groups)."""

    max_in_flight: int = Field(default=64, ge=1)
    """Groups running at once; with `in_flight: auto`, the most that may."""
    in_flight: Literal["fixed", "auto"] = "fixed"
    """`fixed`: `max_in_flight` groups run at once. `auto`: the rollout server sizes the number
    from the share of an episode's life it measures in the engine (Little's law: enough episodes
    that the engine holds its batch of requests on average, fewer where its KV cache holds fewer
    at the measured request length), between one learner step's groups
    and `max_in_flight`; the staleness budget applies either way (rollout/in_flight.py)."""
    max_ready: int = Field(default=64, ge=1)
    """Complete groups held while the learner is slow or away (backpressure past this)."""
    filter_zero_variance: bool = False
    """Drop (and count) groups whose rewards are all equal."""


class BufferConfig(BufferSettings):
    """Trajectory buffer: staleness admission and bounded memory (in groups)."""

    groups_per_step: Annotated[int, Wired("groups_per_step"), Field(ge=1)] = GROUPS_PER_STEP
    """Groups the learner consumes per optimizer step (B)."""
    max_staleness: Annotated[int, Wired("max_staleness"), Field(ge=0)] = MAX_STALENESS
    """Versions a released group's oldest token may lag the learner (S)."""


class StreamSettings(ConfigModel):
    """How finished groups are sent."""

    send_timeout_s: float = Field(default=1.0, gt=0.0)
    """How long one send waits for credit before the group is put back (backpressure)."""


class LearnerConfig(StreamSettings):
    """Where finished groups go."""

    endpoints: Annotated[list[str], Wired("the learner's receive.bind"), Field(min_length=1)]
    """Learner `GroupReceiver` endpoints; groups go round robin to those with credit."""
    sender_id: Annotated[str | None, Wired("the server's name, rollout-<i>")] = None
    """Identity of this rollout server on the stream (default: host and pid)."""

    @field_validator("endpoints")
    @classmethod
    def endpoints_are_zmq(cls, value: list[str]) -> list[str]:
        return [check_zmq_endpoint(v) for v in value]


class HeldOutEvalConfig(ConfigModel):
    """Held-out evaluation inside the rollout server, on its engine, never sent to the learner.

    Runs at the version the server starts at (with `at_start`), every `every_versions`
    versions, and `final_version`; after the final one the server stops (a `train` run ends so).
    Results go to `<log_dir>/eval.jsonl`, one record per evaluation."""

    split: Path | None = None
    """The held-out tasks of a one-env dataset (a file of `{"item_id", "category"}` rows or
    a declared split name); with several envs, each env's `eval_split` in `envs`."""
    every_versions: int = Field(default=10, ge=1)
    """Evaluate at every multiple of this many policy versions."""
    at_start: bool = True
    """Evaluate the weights the server starts with: the base policy's success at version 0, or
    the checkpoint's in a resumed run (after the learner's weights arrived)."""
    final_version: int | None = Field(default=None, ge=0)
    """Evaluate at this version, then stop serving (None: never stop for evaluation)."""
    samples_per_task: int = Field(default=1, ge=1)
    """n of Avg@n / Pass@n."""
    turn_cap: int | None = Field(default=None, ge=1)
    """Turn cap of evaluation episodes (None: each env's largest ScalingInter stage)."""
    limit: int | None = Field(default=None, ge=1)
    """Evaluate only the first this many tasks of each env's split."""
    concurrency: int = Field(default=64, ge=1)
    """Evaluation episodes running at once (they share the engine with training)."""
    temperature: float | None = Field(default=None, ge=0.0, le=10.0)
    """Sampling temperature of evaluation episodes (None: the engine's; 0: greedy). The engine
    must take a per-request `temperature` (vLLM does)."""
    yardsticks: bool = True
    """Measure, once per run, chance (the env's random valid actions) and its scripted rule on
    the same held-out tasks and turn cap, in this process (`<log_dir>/yardsticks.json`): plots
    and the summary show the policy between them."""
    hold_weights: bool = True
    """Apply no weight update while an evaluation runs, so that its record is one version's
    (the learner does not wait: the server takes the newest version when the evaluation ends).
    False: weights may change mid-evaluation; the record's `versions` says how far."""


class AgentConfig(ConfigModel):
    """A user's own agent, trained as it is: it talks to an OpenAI-compatible endpoint this
    server opens (docs/agents.md), one run per episode."""

    function: str | None = None
    """`module:function`, an `async def agent(client, task) -> reward` (`client`: an
    `openai.AsyncOpenAI` bound to the endpoint and the episode)."""
    command: list[str] = Field(default_factory=list)
    """Or a command line run per episode (the endpoint, its token, the episode key and the
    task in its environment; it posts the reward or prints `{"reward": x}` last)."""
    host: str = "127.0.0.1"
    """Where the endpoint listens (loopback unless agents run elsewhere)."""
    port: int = Field(default=0, ge=0, le=65535)
    """Its port (0: a free one)."""
    timeout_s: float = Field(default=600.0, gt=0.0)
    """An episode without a reward after this long is dropped (its group aborted, counted)."""
    tool_parser: ToolParser = "auto"
    """How replies' tool calls are read when a request sends `tools` (see `EnvSettings`)."""
    model_name: str = "policy"
    """The model id `/v1/models` lists."""
    env_urls: Annotated[dict[str, list[str]], Wired("the env servers' HTTP ports")] = Field(
        default_factory=dict
    )
    """Env -> HTTP addresses of its servers, one of which each task names (`task.env_url`);
    empty: the `http://` addresses among `envs`."""

    @model_validator(mode="after")
    def one_way_to_run(self) -> AgentConfig:
        if (self.function is None) == (not self.command):
            raise ValueError("give the agent's `function` or its `command`, one of the two")
        return self


class RolloutSettings(ConfigModel):
    """What a `serve-rollouts` process is told besides its wiring (`RolloutConfig` minus the
    wiring, and minus the sections whose wiring is nested in them)."""

    tokenizer: str | None = None
    """Directory with tokenizer.json + tokenizer_config.json (default: `model`)."""
    engine: EngineConfig = EngineConfig()
    """Sampling and context options of the inference engine."""
    env_pool: EnvPoolConfig = EnvPoolConfig()
    """Timeouts and health checks of the env connection pool."""
    scaling_inter: ScalingInterConfig = ScalingInterConfig()
    """Progressive turn caps by policy version."""
    weights_relay_host: str | None = "auto"
    """Host this server binds its weight-relay endpoint on (other rollout servers relay
    updates to it, see docs/weights.md). "auto": the loopback when `weights_endpoint` is on
    the loopback, else every interface, advertised as the address the learner sees this
    server at. None: relay nothing (the learner sends this server every update itself)."""
    auth: AuthConfig = AuthConfig()
    """The secret that signs every group and weight message."""
    status_interval_s: float = Field(default=5.0, gt=0.0)
    """Seconds between status lines and metrics records."""
    eval: HeldOutEvalConfig | None = None
    """Periodic held-out evaluation on this server's engine (None: off)."""
    check_drift: bool = True
    """Compare each finished episode with a full chat-template render (counts drift)."""
    episode_log_every: int = Field(default=1, ge=0)
    """Append every N-th finished episode to `<log_dir>/episodes.jsonl` (read by
    `agentgym-rl show`); 0 turns episode logs off."""
    agent: AgentConfig | None = None
    """Episodes played by a user's own agent through an OpenAI-compatible endpoint instead of
    the built-in agent loop (None: the built-in loop)."""


class RolloutSection(RolloutSettings):
    """The `rollout:` section of a train config: `train` adds the wiring to make each rollout
    server's `RolloutConfig` (`supervise/plan.py`)."""

    envs: list[EnvSettings] = Field(default_factory=list)
    """How each env is spoken to (an env of `env_servers` left out gets the defaults)."""
    dataset: DatasetConfig | None = None
    """The task split and group size (None: the first env's shipped train split)."""
    buffer: BufferSettings = BufferSettings()
    """Memory bounds of the trajectory buffer."""
    learner: StreamSettings = StreamSettings()
    """How finished groups are sent."""

    @model_validator(mode="after")
    def envs_listed_once(self) -> RolloutSection:
        names = [e.env for e in self.envs]
        if len(set(names)) != len(names):
            raise ValueError(f"envs lists an environment twice: {names}")
        return self


class RolloutConfig(RolloutSettings):
    """Everything one `serve-rollouts` process needs."""

    model: Annotated[str, Wired("model"), Field(min_length=1)]
    """Model path or hub id the engine loads."""
    envs: list[EnvServersConfig] = Field(min_length=1)
    """Env servers, one entry per environment."""
    dataset: DatasetConfig
    """The task split and group size."""
    buffer: BufferConfig = BufferConfig()
    """Staleness admission and memory bounds of the trajectory buffer."""
    learner: LearnerConfig
    """Where finished groups are streamed."""
    weights_endpoint: Annotated[str | None, Wired("the learner's weights.endpoint")] = None
    """Endpoint new weights arrive on (None: weights never change, e.g. evaluation)."""
    log_dir: Annotated[Path, Wired("run_dir/rollout-<i>")] = Path("runs/rollout")
    """Metrics JSONL and logs go here."""

    @property
    def endpoints(self) -> list[str]:
        """Every stream endpoint this process connects to (what `auth` protects); the weight
        relay endpoint it binds follows `weights_endpoint` (see `weights_relay_host`)."""
        relay = self.weights_relay_host
        relays = (
            [f"tcp://{relay}:0"] if self.weights_endpoint and relay not in (None, "auto") else []
        )
        return [
            *self.learner.endpoints,
            *([self.weights_endpoint] if self.weights_endpoint else []),
            *relays,
        ]

    @field_validator("weights_endpoint")
    @classmethod
    def weights_endpoint_is_zmq(cls, value: str | None) -> str | None:
        return None if value is None else check_zmq_endpoint(value)

    @model_validator(mode="after")
    def dataset_env_is_served(self) -> RolloutConfig:
        names = [e.env for e in self.envs]
        if len(set(names)) != len(names):
            raise ValueError(f"envs lists an environment twice: {names}")
        for env in self.dataset.envs:
            if env not in names:
                raise ValueError(f"dataset env {env!r} has no servers in envs {names}")
        if self.eval is not None:
            self.eval_splits()
        return self

    def eval_splits(self) -> dict[str, Path]:
        """Each dataset env's held-out split (ValueError naming an env without one)."""
        assert self.eval is not None
        envs = self.dataset.envs
        if self.eval.split is not None and len(envs) > 1:
            raise ValueError(
                f"eval.split names one split for the envs {envs}: give each its own eval_split "
                "in envs instead"
            )
        own = {e.env: e.eval_split for e in self.envs}
        splits = {env: own.get(env) or self.eval.split for env in envs}
        missing = [env for env, split in splits.items() if split is None]
        if missing:
            raise ValueError(f"eval is on but {missing} have no held-out split (envs[].eval_split)")
        return {env: split for env, split in splits.items() if split is not None}

    def turn_caps(self, env: str) -> ScalingInterConfig:
        """The turn caps `env`'s episodes run under: its own, else the rollout's."""
        own = next((e.scaling_inter for e in self.envs if e.env == env), None)
        return own or self.scaling_inter

    def env_servers(self, env: str) -> EnvServersConfig:
        """The server entry of `env`."""
        for entry in self.envs:
            if entry.env == env:
                return entry
        raise KeyError(env)
