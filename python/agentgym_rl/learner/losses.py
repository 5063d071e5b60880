"""Per-token policy loss for asynchronous GRPO-family training (pure torch).

Contract. All per-token tensors are ``[B, S]`` in the learner's (shifted) alignment, see
`batch.py`: ``logprobs`` is the current policy's log-prob of each label (the only input that
carries a gradient), ``behaviour_logprobs`` the engine's log-prob as sampled, ``proximal_logprobs``
the learner's log-prob before this update (recomputed without grad; ``None`` means "same as
behaviour", the fully on-policy case), ``advantages`` from `advantages.py`, ``loss_mask`` 1 on
generated labels. `policy_loss` returns the scalar loss and detached scalar metrics. Its options
are `agentgym_rl.config.learn.LossConfig`, the validated config model itself (one definition of
the fields, their defaults and their checks).

Per unmasked token, with ``ratio = exp(logprobs - proximal)``:

* PPO clip with clip-higher (DAPO): ``pg = max(-A * ratio, -A * clip(ratio, 1 - eps_low,
  1 + eps_high))``; eps_low 0.2, eps_high 0.2 (set 0.28 for DAPO).
* Off-policy correction ``w`` (constant, no gradient) multiplies ``pg``; ``iw = exp(proximal -
  behaviour)``:
  ``"none"``: ``w = 1`` (plain PPO against the proximal policy);
  ``"decoupled"`` (AReaL): ``w = iw``, and with ``decoupled_cap`` set, tokens whose ``iw``
  exceeds the cap are dropped from the policy-gradient term (``w = 0``, counted);
  ``"tis"`` (default): truncated importance sampling, ``w = min(iw, tis_cap)``, cap 2.0.
* KL to a frozen reference, k3 / low-variance estimator ``exp(ref - cur) - (ref - cur) - 1``
  (>= 0, 0 when equal), times ``kl_coef`` (default 0: off; 1e-3 is the usual value when on).
* Entropy bonus: ``- entropy_coef * entropy`` from per-token entropies passed in (default 0).

Aggregation (`Aggregation`) of the per-token loss ``l``:
``token-mean`` ``sum(l) / n_tokens``; ``seq-mean-token-sum`` mean over sequences of per-sequence
sums; ``seq-mean-token-mean`` mean over sequences of per-sequence means;
``seq-mean-token-sum-norm`` (Dr.GRPO) mean over sequences of per-sequence sums divided by the
constant ``norm_constant`` (e.g. the max generated tokens). Sequences without a generated token
are not counted. For gradient accumulation over micro-batches pass ``global_tokens`` /
``global_seqs`` (the counts over the whole step): the denominators then use them, so summing the
micro-batch losses gives the step's loss exactly.

Metrics (means over unmasked tokens unless said): ``pg_loss``, ``clip_frac`` (and ``_low`` /
``_high``), ``approx_kl`` (k3, current vs proximal), ``mismatch_kl`` (k3, behaviour vs proximal:
~0 on the first step with identical weights), ``tis_weight_mean`` / ``tis_weight_max`` (the
weight ``w`` applied), ``is_dropped_frac``, ``kl_ref``, ``entropy``.
"""

from __future__ import annotations

import torch

from agentgym_rl.config.learn import AGGREGATIONS, Aggregation, LossConfig

_MAX_LOG_RATIO = 20.0  # exp() inputs are clamped to +-20 so a stray token cannot give inf/nan


def k3_kl(logp_sampled: torch.Tensor, logp_other: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(sampled || other): ``exp(d) - d - 1``, ``d = other - sampled``.

    Non-negative for every token and exactly 0 where the two log-probs are equal.
    """
    d = (logp_other - logp_sampled).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return torch.expm1(d) - d


def aggregate(
    per_token: torch.Tensor,
    loss_mask: torch.Tensor,
    mode: Aggregation,
    *,
    norm_constant: float | None = None,
    global_tokens: int | None = None,
    global_seqs: int | None = None,
) -> torch.Tensor:
    """Reduce a ``[B, S]`` per-token loss to a scalar (see the module docstring)."""
    mask = loss_mask.to(per_token.dtype)
    masked = torch.where(mask > 0, per_token, torch.zeros_like(per_token))  # inf/nan-safe
    if mode == "token-mean":
        if global_tokens is not None:
            return masked.sum() / max(global_tokens, 1)
        return masked.sum() / mask.sum().clamp_min(1.0)
    seq_tokens = mask.sum(dim=1)
    has = (seq_tokens > 0).to(per_token.dtype)
    seq_sums = masked.sum(dim=1)
    if mode == "seq-mean-token-sum":
        seq_vals = seq_sums
    elif mode == "seq-mean-token-mean":
        seq_vals = seq_sums / seq_tokens.clamp_min(1.0)
    elif mode == "seq-mean-token-sum-norm":
        if norm_constant is None or norm_constant <= 0.0:
            raise ValueError("seq-mean-token-sum-norm needs norm_constant > 0")
        seq_vals = seq_sums / norm_constant
    else:
        raise ValueError(f"unknown aggregation {mode!r}; expected one of {AGGREGATIONS}")
    total = (seq_vals * has).sum()
    if global_seqs is not None:
        return total / max(global_seqs, 1)
    return total / has.sum().clamp_min(1.0)


def clipped_surrogate(
    logprobs: torch.Tensor,
    proximal_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token PPO clip-higher loss and the masks of tokens clipped below / above.

    ``pg = max(-A * ratio, -A * clip(ratio, 1 - eps_low, 1 + eps_high))`` with
    ``ratio = exp(logprobs - proximal_logprobs)``; a token counts as clipped where the clipped
    branch is the one taken (its gradient is then zero).
    """
    ratio = torch.exp((logprobs - proximal_logprobs).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))
    pg_unclipped = -advantages * ratio
    pg_clipped = -advantages * ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    pg = torch.maximum(pg_unclipped, pg_clipped)
    with torch.no_grad():
        taken = pg_clipped > pg_unclipped
        low = taken & (ratio < 1.0 - eps_low)
        high = taken & (ratio > 1.0 + eps_high)
    return pg, low, high


def correction_weight(
    config: LossConfig, proximal: torch.Tensor, behaviour: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The off-policy weight ``w`` of each token (see the module docstring), the mask of tokens
    dropped by ``decoupled_cap`` and that of tokens whose weight ``tis_cap`` truncated."""
    iw = torch.exp((proximal - behaviour).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))
    none = torch.zeros_like(iw, dtype=torch.bool)
    if config.correction == "none":
        return torch.ones_like(iw), none, none
    if config.correction == "tis":
        return iw.clamp_max(config.tis_cap), none, iw > config.tis_cap
    if config.decoupled_cap is None:
        return iw, none, none
    dropped = iw > config.decoupled_cap
    return torch.where(dropped, torch.zeros_like(iw), iw), dropped, none


@torch.no_grad()
def token_detail(
    config: LossConfig,
    *,
    logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    proximal_logprobs: torch.Tensor | None,
    advantages: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Per token, what `policy_loss` did with it: ``ratio`` (current / proximal), ``weight``
    (``w``) and ``clipped`` (True where the PPO clip, the TIS cap or the drop changed its
    gradient); the run viewer's token view (`token_log.py`)."""
    behaviour = behaviour_logprobs.to(logprobs.dtype)
    proximal = behaviour if proximal_logprobs is None else proximal_logprobs.to(logprobs.dtype)
    _, clip_low, clip_high = clipped_surrogate(
        logprobs, proximal, advantages.to(logprobs.dtype), config.clip_eps_low, config.clip_eps_high
    )
    weight, dropped, truncated = correction_weight(config, proximal, behaviour)
    ratio = torch.exp((logprobs - proximal).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))
    return {"ratio": ratio, "weight": weight, "clipped": clip_low | clip_high | dropped | truncated}


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(x.dtype)
    return torch.where(m > 0, x, torch.zeros_like(x)).sum() / m.sum().clamp_min(1.0)


def policy_loss(
    config: LossConfig,
    *,
    logprobs: torch.Tensor,
    behaviour_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    proximal_logprobs: torch.Tensor | None = None,
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    global_tokens: int | None = None,
    global_seqs: int | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The scalar loss to minimise and detached scalar metrics (see the module docstring)."""
    if logprobs.dim() != 2:
        raise ValueError(f"logprobs must be [B, S], got {tuple(logprobs.shape)}")
    for name, t in (
        ("behaviour_logprobs", behaviour_logprobs),
        ("advantages", advantages),
        ("loss_mask", loss_mask),
        ("proximal_logprobs", proximal_logprobs),
        ("ref_logprobs", ref_logprobs),
        ("entropy", entropy),
    ):
        if t is not None and t.shape != logprobs.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {tuple(logprobs.shape)}")
    if config.kl_coef > 0.0 and ref_logprobs is None:
        raise ValueError("kl_coef > 0 needs ref_logprobs")
    mask = loss_mask.bool()
    behaviour = behaviour_logprobs.detach().to(logprobs.dtype)
    proximal = behaviour if proximal_logprobs is None else proximal_logprobs.detach()
    proximal = proximal.to(logprobs.dtype)
    adv = advantages.detach().to(logprobs.dtype)

    pg, clip_low, clip_high = clipped_surrogate(
        logprobs, proximal, adv, config.clip_eps_low, config.clip_eps_high
    )

    weight, dropped, _ = correction_weight(config, proximal, behaviour)
    per_token = weight * pg

    def reduce(x: torch.Tensor) -> torch.Tensor:
        return aggregate(
            x,
            mask,
            config.aggregation,
            norm_constant=config.norm_constant,
            global_tokens=global_tokens,
            global_seqs=global_seqs,
        )

    pg_loss = reduce(per_token)
    loss = pg_loss
    metrics: dict[str, torch.Tensor] = {}
    if ref_logprobs is not None:
        kl = k3_kl(logprobs, ref_logprobs.detach().to(logprobs.dtype))
        if config.kl_coef > 0.0:
            loss = loss + config.kl_coef * reduce(kl)
        metrics["kl_ref"] = _masked_mean(kl.detach(), mask)
    if entropy is not None:
        if config.entropy_coef != 0.0:
            ent = reduce(entropy.to(logprobs.dtype))
            loss = loss - config.entropy_coef * ent
        metrics["entropy"] = _masked_mean(entropy.detach(), mask)

    with torch.no_grad():
        w_sel = weight[mask]
        metrics.update(
            pg_loss=pg_loss.detach(),
            clip_frac=_masked_mean((clip_low | clip_high).float(), mask),
            clip_frac_low=_masked_mean(clip_low.float(), mask),
            clip_frac_high=_masked_mean(clip_high.float(), mask),
            approx_kl=_masked_mean(k3_kl(proximal, logprobs.detach()), mask),
            mismatch_kl=_masked_mean(k3_kl(behaviour, proximal), mask),
            tis_weight_mean=_masked_mean(weight, mask),
            tis_weight_max=w_sel.max() if w_sel.numel() else weight.new_zeros(()),
            is_dropped_frac=_masked_mean(dropped.float(), mask),
        )
    return loss, metrics
