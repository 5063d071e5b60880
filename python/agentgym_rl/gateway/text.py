"""`/v1/completions` episodes: raw text prompts, token-in/token-out without a chat template.

Contract: a `TextSegment` holds the ids of one prompt and the completions sampled after it.
`AgentEpisode.place_text(prompt)` continues the idle segment whose text (prompt plus the
completions it returned, as returned) the new prompt starts with: only the new text is encoded
and appended (mask 0), so earlier sampled ids are never re-tokenised; any other prompt starts a
new segment (a fork, counted as the chat segments are). `finish` makes each segment a sample;
its drift flag is set when decoding its ids does not give back its text (a special token the
text lacks, or text that does not decode back as written).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agentgym_rl import _core
from agentgym_rl.episode.types import Generation
from agentgym_rl.trajectory import ChatTokenizer
from agentgym_rl.wire.types import Status


@dataclass
class TextSegment:
    """One raw-text part of an episode; see the module docstring."""

    text: str
    ids: list[int]
    prompt_version: int
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    spans: list[int] = field(default_factory=list)
    busy: bool = False

    @classmethod
    def start(cls, chat: ChatTokenizer, prompt: str, version: int) -> TextSegment:
        seg = cls("", [], version)
        seg.extend(chat, prompt)
        return seg

    @property
    def turns(self) -> int:
        return len(self.spans) // 2

    def extend(self, chat: ChatTokenizer, text: str) -> None:
        """Append prompt text (context, mask 0)."""
        new = [int(i) for i in chat.encode(text)]
        last = self.versions[-1] if self.versions else self.prompt_version
        self.ids += new
        self.mask += [0] * len(new)
        self.logprobs += [0.0] * len(new)
        self.versions += [last] * len(new)
        self.text += text

    def add(self, gen: Generation, text: str) -> None:
        """Append a sampled completion verbatim (mask 1) and the text it was returned as."""
        self.spans += [len(self.ids), len(self.ids) + len(gen.token_ids)]
        self.ids += gen.token_ids
        self.mask += [1] * len(gen.token_ids)
        self.logprobs += gen.logprobs
        self.versions += gen.versions
        self.text += text

    def sample(
        self,
        chat: ChatTokenizer,
        stop_ids: set[int],
        *,
        reward: float,
        turn_cap: int,
        stage: int,
        request_id: str,
    ) -> _core.Sample:
        drift = chat.decode([i for i in self.ids if i not in stop_ids]) != self.text
        return _core.Sample(
            np.asarray(self.ids, np.uint32),
            np.asarray(self.mask, np.uint8),
            np.asarray(self.logprobs, np.float32),
            np.asarray(self.versions, np.uint32),
            np.asarray(self.spans, np.uint32),
            reward=reward,
            status=Status.DONE.value,
            drift=drift,
            turns=self.turns,
            turn_cap=turn_cap,
            stage=stage,
            dispatch_version=self.prompt_version,
            request_id=request_id,
        )
