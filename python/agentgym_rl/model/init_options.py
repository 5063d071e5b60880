"""The options of `init-model` (import-light: the CLI parses with these defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

INFO_FILE = "init_model.json"
# files the env package ships, spelled as configs spell them (resolved by `shipped_path`)
DEFAULT_SPLITS = {
    "babyai": Path("envs/agentgym_envs/babyai/data/goto_train.json"),
    "textcraft": Path("envs/agentgym_envs/textcraft/data/train.json"),
    "sciworld": Path("envs/agentgym_envs/sciworld/data/train.json"),
    "searchqa": Path("envs/agentgym_envs/searchqa/data/train.json"),
    "webarena": Path("envs/agentgym_envs/web/data/webarena_train.json"),
    "miniwob": Path("envs/agentgym_envs/web/data/miniwob_train.json"),
}


@dataclass(frozen=True, slots=True)
class InitOptions:
    """Everything `init-model` takes (the CLI flags, one to one)."""

    out: Path
    env: str = "babyai"
    split: Path | None = None
    transcripts: int = 2000
    max_turns: int = 4
    system_prompt: str | None = None
    env_options: tuple[tuple[str, str], ...] = ()
    vocab_size: int = 600
    phrase_tokens: bool = True
    hidden: int = 128
    layers: int = 3
    heads: int = 2
    kv_heads: int = 2
    intermediate: int = 384
    warmup_steps: int = 300
    warmup_batch: int = 16
    warmup_lr: float = 2e-3
    warmup_observation_weight: float = 0.0
    thought_line: str | None = None
    seed: int = 0
    threads: int | None = None
    force: bool = False

    def split_path(self) -> Path:
        if self.split is not None:
            return _shipped(self.split)
        if self.env not in DEFAULT_SPLITS:
            raise ValueError(f"no default training split for env {self.env!r}: pass --split")
        return _shipped(DEFAULT_SPLITS[self.env])


def _shipped(path: str | Path) -> Path:
    # imported here: `agentgym_rl.config` loads pydantic, which parsing the CLI must not
    from agentgym_rl.env_discovery import shipped_path

    return shipped_path(path)
