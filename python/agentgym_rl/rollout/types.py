"""Carriers shared by the rollout side: what the engine returns and what the loop depends on.

`Engine` is the contract between the agent loop (`agent.py`, `dispatcher.py`) and the inference
engine (`engine.py`, vLLM). The loop never imports vLLM; anything that satisfies `Engine` can
drive it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

FinishReason = Literal["stop", "length", "abort"]


@dataclass(frozen=True, slots=True)
class Generation:
    """One generated turn, token-in/token-out.

    `token_ids` are the sampled ids exactly as the engine produced them (the stop token included
    when the turn ended on one); `logprobs[i]` is the log-probability of `token_ids[i]` under the
    distribution actually sampled from (after temperature/top-p: vLLM's "processed_logprobs");
    `versions[i]` is the policy version of the weights that produced token i (a turn that spans a
    live weight update carries two versions).
    """

    token_ids: list[int]
    logprobs: list[float]
    versions: list[int]
    finish_reason: FinishReason


class Engine(Protocol):
    """What the agent loop needs from an inference engine."""

    @property
    def version(self) -> int:
        """The policy version of the weights currently loaded."""
        ...

    async def generate(
        self, prompt_ids: list[int], *, max_tokens: int, request_id: str
    ) -> Generation:
        """Continue `prompt_ids` by one assistant turn (stops at the model's stop tokens)."""
        ...
