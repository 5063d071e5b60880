"""The model passes of one optimizer step on this rank's pipeline stage.

Contract. `Passes` runs a step's micro-batches (`batch.Batch.split`) through a Megatron model
with `pipeline.run_stages` (GPipe with pp > 1; each micro-batch's backward right after its
forward with pp = 1), every forward at the rollout engine's sampling `temperature` and, with
`autocast`, under bf16 autocast. Results exist on the last pipeline stage only (None
elsewhere):

* `logprobs(micro, model)`: per-token log-probs of each micro-batch without grad (the
  reference policy's, and the proximal ones with `recompute_proximal`), computed at the loss
  mask's positions only (0 elsewhere: only those reach the vocabulary head);
* `loss_and_backward(micro, refs, proximal, model, loss, counts)`: the policy forward with
  grad (plus per-token entropies with an entropy bonus or `loss.track_entropy`),
  `losses.policy_loss` with the denominators of the whole step (`StepCounts`, summed over
  data-parallel ranks, so summing micro-batch losses gives the step's loss exactly), backward;
  one `(loss value, metrics, loss tokens)` per micro-batch. A micro-batch whose proximal entry is None uses its own
  detached log-probs (one optimizer step per batch: they come from the pre-update weights).
  With `keep` (a `TokenKeeper`), each micro-batch's forward is handed to it as well, with
  entropies computed (the token log of `token_log.py`).

`micro_totals` folds those results into the step's metric sums (weighted by loss tokens), its
loss and the largest TIS weight, the same on every pipeline stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import torch

from agentgym_rl.config.learn import LossConfig
from agentgym_rl.learner import model as lm
from agentgym_rl.learner.losses import policy_loss
from agentgym_rl.learner.pipeline import from_last_stage, is_last_stage, run_stages


class StepCounts(NamedTuple):
    """A step's sizes summed over data-parallel ranks: the loss's denominators, the real
    (unpadded) tokens and the computed ones (every micro-batch's rows x padded length)."""

    loss_tokens: float
    seqs: float
    tokens: float
    computed: float


class MicroTotals(NamedTuple):
    """The micro-batches' results folded: metric sums weighted by loss tokens, the summed loss,
    the largest TIS weight."""

    sums: dict[str, float]
    loss: float
    tis_max: float


def micro_totals(results: list[Any]) -> MicroTotals:
    """Fold `loss_and_backward`'s results on the last pipeline stage, then give every stage
    the same totals (collective over the pipeline group): all of them log and reduce them."""
    sums: dict[str, float] = {}
    loss_total, tis_max = 0.0, 0.0
    for loss_value, m, w in results if is_last_stage() else []:
        loss_total += loss_value
        for k, v in m.items():
            sums[k] = sums.get(k, 0.0) + float(v) * w
        tis_max = max(tis_max, float(m["tis_weight_max"]))
    return MicroTotals(*from_last_stage((sums, loss_total, tis_max)))


class TokenKeeper(Protocol):
    """Takes a micro-batch's detached per-token tensors after its loss (`token_log.py`)."""

    def __call__(
        self, mb: Any, logprobs: torch.Tensor, entropy: torch.Tensor, proximal: torch.Tensor | None
    ) -> None: ...


@dataclass(frozen=True)
class Passes:
    """How this rank runs micro-batches through a model (see the module docstring)."""

    device: torch.device
    temperature: float
    autocast: torch.dtype | None
    hidden_size: int

    def logprobs(self, micro: list[Any], model: torch.nn.Module) -> list[Any]:
        """No-grad log-probs of every micro-batch under `model` (last pipeline stage; None on
        the others)."""

        def forward(mb: Any) -> Any:
            if not is_last_stage():
                return self._stage_hidden(mb, model)
            return None, self._logprobs(mb, model)

        with torch.no_grad():
            return run_stages(
                micro, forward, self._hidden_shape, model=model, backward=False, device=self.device
            )

    def loss_and_backward(
        self,
        micro: list[Any],
        refs: list[Any],
        proximal: list[Any],
        model: torch.nn.Module,
        loss: LossConfig,
        counts: StepCounts,
        keep: TokenKeeper | None = None,
    ) -> list[Any]:
        """Forward with grad, policy loss and backward of every micro-batch (the last stage
        returns `(loss value, metrics, loss tokens)` per micro-batch)."""

        def forward(item: tuple[Any, Any, Any]) -> Any:
            mb, ref, prox = item
            if not is_last_stage():
                return self._stage_hidden(mb, model)
            d = self.device
            want = loss.entropy_coef != 0.0 or loss.track_entropy or keep is not None
            logprobs, entropy = self._logprobs_and_entropy(
                mb, model, want, grad=loss.entropy_coef != 0.0
            )
            if keep is not None and entropy is not None:
                keep(mb, logprobs.detach(), entropy.detach(), prox)
            value, m = policy_loss(
                loss,
                logprobs=logprobs,
                behaviour_logprobs=mb.behaviour_logprobs.to(d),
                advantages=mb.advantages.to(d),
                loss_mask=mb.loss_mask.to(d),
                proximal_logprobs=logprobs.detach() if prox is None else prox,
                ref_logprobs=ref,
                entropy=entropy,
                global_tokens=int(counts.loss_tokens),
                global_seqs=int(counts.seqs),
            )
            return value, (float(value.detach()), m, float(mb.num_loss_tokens))

        return run_stages(
            list(zip(micro, refs, proximal, strict=True)),
            forward,
            lambda item: self._hidden_shape(item[0]),
            model=model,
            backward=True,
            device=self.device,
        )

    def _logprobs(self, mb: Any, model: torch.nn.Module) -> torch.Tensor:
        return lm.token_logprobs(
            model,
            *self._inputs(mb),
            self.temperature,
            autocast=self.autocast,
            positions=self._loss_positions(mb),
        )

    def _logprobs_and_entropy(
        self, mb: Any, model: torch.nn.Module, entropy: bool, grad: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The policy's log-probs (with grad) and, when `entropy`, per-token entropies (with
        grad when `grad`: an entropy bonus trains on them; logged alone, they need none)."""
        if not entropy:
            return self._logprobs(mb, model), None
        return lm.token_logprobs_and_entropy(
            model,
            *self._inputs(mb),
            self.temperature,
            autocast=self.autocast,
            positions=self._loss_positions(mb),
            entropy_grad=grad,
        )

    def _loss_positions(self, mb: Any) -> torch.Tensor:
        """Where the loss reads log-probs: the only positions projected onto the vocabulary
        (elsewhere the log-probs are 0, and every use of them is masked)."""
        return mb.loss_mask.to(self.device) > 0

    def _inputs(self, mb: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A micro-batch's ids, positions and labels on this rank's device."""
        d = self.device
        return mb.input_ids.to(d), mb.position_ids.to(d), mb.labels.to(d)

    def _hidden_shape(self, mb: Any) -> tuple[int, int, int]:
        """The hidden states a pipeline stage passes on for `mb`: ``[s, b, h]``."""
        batch, seq = mb.input_ids.shape
        return (seq, batch, self.hidden_size)

    def _stage_hidden(self, mb: Any, model: torch.nn.Module) -> torch.Tensor:
        d = self.device
        return lm.stage_hidden(
            model, mb.input_ids.to(d), mb.position_ids.to(d), autocast=self.autocast
        )
