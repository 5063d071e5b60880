"""A scripted `Engine` over the ChatML fixture tokenizer (no model), and the sample checks that
go with it. Shared by the episode and rollout tests."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from agentgym_rl import _core
from agentgym_rl.episode.types import Generation
from agentgym_rl.trajectory import ChatTokenizer

ROOT = Path(__file__).resolve().parents[1]
__all__ = ["CHATML", "ScriptedEngine", "babyai_policy", "check_sample_arrays"]

CHATML = ROOT / "tests" / "fixtures" / "templates" / "chatml"


_AVAILABLE = re.compile(r"Available actions: \[(.*?)\]")


def babyai_policy(prompt: str, request_id: str) -> str:
    """Pick an available action by a hash of the request id (deterministic, varied)."""
    found = _AVAILABLE.findall(prompt)
    actions = re.findall(r'"([^"]+)"', found[-1]) if found else ["turn left"]
    pick = actions[sum(map(ord, request_id)) % len(actions)]
    return f"Thought: let me try.\nAction: {pick}"


def _cut_at_stop(text: str, stop: Sequence[str]) -> str | None:
    """`text` up to and including the earliest stop string in it, or None when it has none."""
    ends = [text.index(s) + len(s) for s in stop if s in text]
    return text[: min(ends)] if ends else None


class ScriptedEngine:
    """An `Engine` whose turns come from `policy(decoded prompt, request_id)`: real token ids
    of the tiny tokenizer plus the stop token, logprob -0.5 each, stamped with `version`. As
    vLLM does, a turn that writes one of the call's `stop` strings ends right after it, with no
    stop token."""

    def __init__(
        self,
        chat: ChatTokenizer,
        policy: Callable[[str, str], str] = babyai_policy,
        *,
        delay_s: float = 0.0,
        bump_every: int | None = None,
    ) -> None:
        self.chat, self.policy, self.delay_s, self.bump_every = chat, policy, delay_s, bump_every
        self._version = 0
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.gate: asyncio.Event | None = None
        self.stop_token_ids = [int(chat.eos_token_id or 0)]
        self.stops: list[tuple[str, ...]] = []
        """The stop strings each generate call was given, in call order."""

    @property
    def version(self) -> int:
        return self._version

    def set_version(self, version: int) -> None:
        self._version = version

    async def generate(
        self, prompt_ids: list[int], *, max_tokens: int, request_id: str, stop: Sequence[str] = ()
    ) -> Generation:
        assert all(isinstance(i, int) for i in prompt_ids) and max_tokens > 0
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            text = self.policy(self.chat.decode(prompt_ids), request_id)
            cut = _cut_at_stop(text, stop)
            ids = [int(i) for i in self.chat.encode(cut or text)]
            ids += [] if cut else self.stop_token_ids  # vLLM adds no stop token after a string
            self.stops.append(tuple(stop))
            finish = "stop"
            if len(ids) > max_tokens:
                ids, finish = ids[:max_tokens], "length"
            gen = Generation(ids, [-0.5] * len(ids), [self._version] * len(ids), finish)
            self.calls += 1
            if self.bump_every and self.calls % self.bump_every == 0:
                self._version += 1
            return gen
        finally:
            self.in_flight -= 1


def check_sample_arrays(sample: _core.Sample) -> None:
    """Per-token arrays aligned; mask 1 exactly on the generated spans."""
    n = len(sample.input_ids)
    assert len(sample.loss_mask) == len(sample.logprobs) == len(sample.versions) == n
    spans = sample.turn_spans.reshape(-1, 2) if sample.turn_spans.ndim == 1 else sample.turn_spans
    expected = [0] * n
    for start, end in spans:
        assert 0 <= start < end <= n
        expected[start:end] = [1] * (end - start)
    assert list(sample.loss_mask) == expected
    assert len(spans) == sample.turns
    for start, end in spans:
        assert all(lp == -0.5 for lp in sample.logprobs[start:end])
