"""Typed front of the Rust trajectory builder (``agentgym_rl._core``).

Contract: a rollout builds one ``TrajectoryBuilder`` per episode from the episode's prefix
messages, appends each generated turn exactly as the engine returned it (ids, behaviour
log-probs, policy version) and each environment step's messages, then calls ``finish()`` for
numpy arrays (input_ids u32, loss_mask u8, logprobs f32, versions u32, turn_spans u32) plus the
``truncated`` and ``drift`` flags. Generated ids are never re-tokenized; observation tokens are
the chat template's delta against a fixed base. Messages are chat dicts; they cross into Rust
as JSON, where rendering and encoding run with the GIL released.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

import numpy as np
import numpy.typing as npt

from agentgym_rl import _core
from agentgym_rl._core import DriftReport, Prompt, Trajectory

Message = Mapping[str, Any]

__all__ = ["ChatTokenizer", "DriftReport", "Message", "Prompt", "Trajectory", "TrajectoryBuilder"]


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _tools(tools: Sequence[Message] | None) -> str | None:
    return None if tools is None else _dumps(list(tools))


class ChatTokenizer:
    """A tokenizer with its chat template, rendered like ``transformers.apply_chat_template``."""

    def __init__(self, inner: _core.ChatTokenizer) -> None:
        self.inner = inner

    @classmethod
    def from_dir(cls, path: str | PathLike[str]) -> ChatTokenizer:
        """Load ``tokenizer.json``, ``tokenizer_config.json`` and ``chat_template.jinja``."""
        return cls(_core.ChatTokenizer.from_dir(str(path)))

    @classmethod
    def from_parts(
        cls,
        tokenizer_json: str | PathLike[str],
        chat_template: str,
        special_tokens: Mapping[str, str] | None = None,
    ) -> ChatTokenizer:
        """Load from a ``tokenizer.json`` path, a template string and e.g. ``{"eos_token": ...}``."""
        special = None if special_tokens is None else dict(special_tokens)
        return cls(_core.ChatTokenizer.from_parts(str(tokenizer_json), chat_template, special))

    def render(
        self,
        messages: Sequence[Message],
        *,
        add_generation_prompt: bool = False,
        tools: Sequence[Message] | None = None,
    ) -> str:
        return self.inner.render(
            _dumps(list(messages)),
            add_generation_prompt=add_generation_prompt,
            tools_json=_tools(tools),
        )

    def apply_chat_template(
        self,
        messages: Sequence[Message],
        *,
        add_generation_prompt: bool = False,
        tools: Sequence[Message] | None = None,
    ) -> npt.NDArray[np.uint32]:
        return self.inner.apply_chat_template(
            _dumps(list(messages)),
            add_generation_prompt=add_generation_prompt,
            tools_json=_tools(tools),
        )

    def encode(self, text: str) -> npt.NDArray[np.uint32]:
        return self.inner.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.inner.decode([int(i) for i in ids])

    @property
    def eos_token_id(self) -> int | None:
        return self.inner.eos_token_id

    @property
    def drift_count(self) -> int:
        return self.inner.drift_count

    @property
    def checked_count(self) -> int:
        return self.inner.checked_count

    def prompt(self, messages: Sequence[Message], tools: Sequence[Message] | None = None) -> Prompt:
        """Render and encode an episode prefix once; share it between the samples of a group."""
        return self.inner.prompt(_dumps(list(messages)), _tools(tools))


class TrajectoryBuilder:
    """Builds one episode's training arrays; see the module docstring."""

    def __init__(
        self,
        chat: ChatTokenizer,
        prompt: Prompt | Sequence[Message],
        *,
        tools: Sequence[Message] | None = None,
        max_len: int = 32768,
        stop_ids: Sequence[int] | None = None,
        check_drift: bool = True,
        strict: bool = False,
        prompt_version: int = 0,
    ) -> None:
        if not isinstance(prompt, Prompt):
            prompt = chat.prompt(prompt, tools)
        self.inner = _core.TrajectoryBuilder(
            chat.inner,
            prompt,
            max_len=max_len,
            stop_ids=None if stop_ids is None else [int(i) for i in stop_ids],
            check_drift=check_drift,
            strict=strict,
            prompt_version=prompt_version,
        )

    def add_generated(
        self, ids: Sequence[int], logprobs: Sequence[float], version: int | Sequence[int]
    ) -> bool:
        """Append a generated turn verbatim. False: it did not fit; the trajectory is final."""
        versions = version if isinstance(version, int) else [int(v) for v in version]
        return self.inner.add_generated(list(ids), list(logprobs), versions)

    def add_observation(self, messages: Message | Sequence[Message]) -> bool:
        """Append one env step (one message, or consecutive ones). False: it did not fit."""
        batch = [messages] if isinstance(messages, Mapping) else list(messages)
        return self.inner.add_observation(_dumps(batch))

    def check_drift(self) -> DriftReport:
        return self.inner.check_drift()

    def finish(self) -> Trajectory:
        return self.inner.finish()

    def __len__(self) -> int:
        return len(self.inner)

    @property
    def ids(self) -> npt.NDArray[np.uint32]:
        """The token ids built so far (a copy): the engine's next prompt, token-in."""
        return self.inner.ids

    @property
    def remaining(self) -> int:
        """Tokens left before max_len: pass it to the engine as max_tokens."""
        return self.inner.remaining

    @property
    def truncated(self) -> bool:
        return self.inner.truncated

    @property
    def turns(self) -> int:
        return self.inner.turns
