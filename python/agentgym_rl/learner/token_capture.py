"""The token log's records taken during a step's passes (the torch side of `token_log.py`).

Contract. `StepTokens(loss, step, picked)` is the `passes.TokenKeeper` of one logged step:
`picked` maps the batch rows to log (`Batch.row_ids`) to their request ids; called with each
micro-batch's detached log-probs, entropies and proximal log-probs, it keeps one `TokenRecord`
per picked row it meets, read at the row's loss-mask positions (its trained tokens, in order),
with what the loss did to each token (`losses.token_detail`). `records` lists them by row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentgym_rl.config.learn import LossConfig
from agentgym_rl.learner.losses import token_detail
from agentgym_rl.learner.token_log import TokenRecord


class StepTokens:
    """See the module docstring."""

    def __init__(self, loss: LossConfig, step: int, picked: dict[int, str]) -> None:
        self.loss, self.step, self.picked = loss, step, picked
        self._kept: dict[int, TokenRecord] = {}

    @property
    def records(self) -> list[TokenRecord]:
        return [self._kept[r] for r in sorted(self._kept)]

    def __call__(
        self, mb: Any, logprobs: torch.Tensor, entropy: torch.Tensor, proximal: torch.Tensor | None
    ) -> None:
        rows = [(i, r) for i, r in enumerate(mb.row_ids.tolist()) if r in self.picked]
        if not rows:
            return
        d = logprobs.device
        detail = token_detail(
            self.loss,
            logprobs=logprobs,
            behaviour_logprobs=mb.behaviour_logprobs.to(d),
            proximal_logprobs=logprobs if proximal is None else proximal,
            advantages=mb.advantages.to(d),
        )
        for i, row in rows:
            at = mb.loss_mask[i].to(d) > 0

            def read(t: torch.Tensor, i: int = i, at: torch.Tensor = at) -> np.ndarray:
                return t[i][at].float().cpu().numpy()

            self._kept[row] = TokenRecord(
                self.step,
                self.picked[row],
                learner=read(logprobs),
                behaviour=read(mb.behaviour_logprobs.to(d)),
                entropy=read(entropy),
                weight=read(detail["weight"]),
                ratio=read(detail["ratio"]),
                clipped=np.flatnonzero(read(detail["clipped"])).tolist(),
            )


__all__ = ["StepTokens"]
