"""Per-token advantages from per-sample scalar rewards (GRPO family and REINFORCE++).

Contract. Inputs are `rewards` ``[B]`` (one scalar per sample, the episode's final reward),
`group_ids` ``[B]`` (any integers; samples sharing an id are the n samples of one task) and
`loss_mask` ``[B, S]`` (1 exactly on generated tokens, in whatever alignment the caller trains
with: the learner passes the *shifted* mask of `batch.py`). The output is ``[B, S]`` float32,
exactly zero wherever `loss_mask` is 0. Samples without a generated token get zero advantage.

Estimators (`Estimator`):

* ``grpo`` (default): ``(r_i - mean_g) / (std_g + eps)``, eps 1e-6, broadcast over the sample's
  generated tokens. ``std_g`` is the *sample* standard deviation (Bessel, n - 1) by default,
  as ``torch.std`` computes it and as the reference (AgentGym-RL / verl GRPO) does, so the scales
  are comparable; pass ``unbiased_std=False`` for the population std. A group of one sample has
  advantage 0 (its std is taken as 1). Example: rewards ``[1, 0, 0, 1]`` in one group give
  mean 0.5, sample std ``sqrt(1/3)``, advantages ``+-0.5 / (0.57735 + 1e-6)`` = ``+-0.866``.
* ``dr_grpo``: ``r_i - mean_g`` (Dr.GRPO: no std division).
* ``rloo``: ``r_i - mean_{j != i, j in g} r_j`` (leave-one-out); every group needs n >= 2,
  otherwise `ValueError` naming the offending groups.
* ``reinforce_plus_plus``: the reward is placed on the *last generated token* (the last position
  where ``loss_mask == 1``, never on a masked observation or padding token, which is the
  reference's defect), returns are discounted backwards over generated tokens only
  (``G_t = gamma ** k_t * r`` with ``k_t`` the number of generated tokens after t; masked tokens
  neither receive nor consume discount), then whitened over all unmasked tokens of the batch
  with the same std convention and eps. With data parallelism "the batch" is the whole step's
  batch over every rank: pass ``dp_sum`` (returns the sum of a float64 tensor over the
  data-parallel group) and the statistics are summed over ranks in two reductions (sum and
  count, then squared deviations from the global mean), so dp ranks whiten exactly as one
  process holding all their samples would.

Episodes of several samples (step-wise context: one sample per turn; a user agent's segments):
pass ``episode_ids`` ``[B]`` (samples sharing an id are one episode, `batch.episode_ids`) and the
group estimators take each episode once, by its reward, and give every sample of it the episode's
score: a 30-turn episode weighs as much in its group's mean and std as a 3-turn one. REINFORCE++
puts the episode's reward on each sample's last generated token (each sample is its own
sequence of tokens to discount over).

Mixed runs: `scale_per_env` divides each env's advantages by their standard deviation over that
env's generated tokens in the batch (on each data-parallel rank), so that an env whose rewards
are larger does not dominate the gradient. `grpo` needs it least (each group is already divided
by its own std); `dr_grpo`, `rloo` and `reinforce_plus_plus` keep the rewards' scale.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

import torch

Estimator = Literal["grpo", "dr_grpo", "rloo", "reinforce_plus_plus"]
ESTIMATORS: tuple[str, ...] = get_args(Estimator)
DpSum = Callable[[torch.Tensor], torch.Tensor]
"""Sums a tensor over the data-parallel group (returns the sum; identity with one rank)."""


def _group_stats(
    rewards: torch.Tensor, group_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample (group sum, group count, group sum of squares) and the unique group ids."""
    uniq, inverse = torch.unique(group_ids, return_inverse=True)
    g = uniq.numel()
    r = rewards.to(torch.float64)
    zeros = torch.zeros(g, dtype=torch.float64, device=r.device)
    sums = zeros.index_add(0, inverse, r)
    counts = zeros.index_add(0, inverse, torch.ones_like(r))
    sq = zeros.index_add(0, inverse, r * r)
    return sums[inverse], counts[inverse], sq[inverse], uniq


def _check(rewards: torch.Tensor, group_ids: torch.Tensor) -> None:
    if rewards.dim() != 1 or group_ids.shape != rewards.shape:
        raise ValueError(
            f"rewards and group_ids must both be [B]; got {tuple(rewards.shape)} "
            f"and {tuple(group_ids.shape)}"
        )


def group_normalized(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    divide_by_std: bool = True,
    eps: float = 1e-6,
    unbiased_std: bool = True,
) -> torch.Tensor:
    """Per-sample GRPO (``divide_by_std``) or Dr.GRPO scores, ``[B]`` float32."""
    _check(rewards, group_ids)
    sums, counts, sq, _ = _group_stats(rewards, group_ids)
    r = rewards.to(torch.float64)
    mean = sums / counts
    centred = r - mean
    if not divide_by_std:
        return centred.to(torch.float32)
    # sum of squared deviations = sum r^2 - n * mean^2 (float64 keeps this exact enough)
    ss = (sq - counts * mean * mean).clamp_min(0.0)
    denom = (counts - 1.0) if unbiased_std else counts
    std = torch.where(counts > 1, torch.sqrt(ss / denom.clamp_min(1.0)), torch.ones_like(ss))
    return (centred / (std + eps)).to(torch.float32)


def leave_one_out(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """Per-sample RLOO scores ``r_i - mean_{j != i} r_j``, ``[B]`` float32."""
    _check(rewards, group_ids)
    sums, counts, _, _ = _group_stats(rewards, group_ids)
    if bool((counts < 2).any()):
        bad = sorted({int(g) for g in group_ids[counts < 2].tolist()})
        raise ValueError(f"rloo needs at least 2 samples per group; groups of one: {bad}")
    r = rewards.to(torch.float64)
    return (r - (sums - r) / (counts - 1.0)).to(torch.float32)


def first_of_each(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For ``ids`` ``[B]``: the row of each distinct id's first occurrence, and each row's place
    among the distinct ids (so ``x[first][inverse]`` spreads a per-id value over its rows)."""
    uniq, inverse = torch.unique(ids, return_inverse=True)
    rows = torch.arange(ids.numel(), device=ids.device)
    first = torch.full((uniq.numel(),), ids.numel(), dtype=torch.int64, device=ids.device)
    first = first.scatter_reduce(0, inverse, rows, reduce="amin")
    return first, inverse


def terminal_rewards(rewards: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """``[B, S]`` zeros with each sample's reward on its last generated token (mask == 1)."""
    mask = loss_mask.bool()
    if rewards.dim() != 1 or mask.dim() != 2 or mask.shape[0] != rewards.shape[0]:
        raise ValueError(
            f"rewards must be [B] and loss_mask [B, S]; got {tuple(rewards.shape)} "
            f"and {tuple(mask.shape)}"
        )
    s = mask.shape[1]
    pos = torch.arange(s, device=mask.device).expand_as(mask)
    last = torch.where(mask, pos, torch.full_like(pos, -1)).amax(dim=1)  # -1: none generated
    out = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    has = last >= 0
    rows = torch.nonzero(has, as_tuple=True)[0]
    out[rows, last[has]] = rewards[has].to(torch.float32)
    return out


def discounted_returns(
    rewards: torch.Tensor, loss_mask: torch.Tensor, gamma: float = 1.0
) -> torch.Tensor:
    """REINFORCE++ returns ``[B, S]``: terminal reward discounted over generated tokens only."""
    mask = loss_mask.to(torch.float64)
    # generated tokens strictly after t: reverse cumulative sum minus self
    after = mask.flip(1).cumsum(1).flip(1) - mask
    r = rewards.to(torch.float64).unsqueeze(1)
    returns = r * (gamma**after) * mask
    return returns.to(torch.float32)


def reinforce_plus_plus(
    rewards: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    gamma: float = 1.0,
    eps: float = 1e-6,
    unbiased_std: bool = True,
    dp_sum: DpSum | None = None,
) -> torch.Tensor:
    """Returns whitened over all unmasked tokens of the (global) batch, ``[B, S]``, 0 if masked."""
    mask = loss_mask.bool()
    returns = discounted_returns(rewards, loss_mask, gamma).to(torch.float64)
    vals = returns[mask]
    reduce = dp_sum if dp_sum is not None else (lambda t: t)
    total, count = reduce(torch.stack([vals.sum(), vals.new_tensor(float(vals.numel()))])).tolist()
    if count == 0:
        return torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    mean = total / count
    (sq_dev,) = reduce((vals - mean).square().sum().reshape(1)).tolist()
    dof = count - 1 if unbiased_std else count
    std = (sq_dev / dof) ** 0.5 if count > 1 else 1.0
    whitened = (returns - mean) / (std + eps)
    return torch.where(mask, whitened, torch.zeros_like(whitened)).to(torch.float32)


def scale_per_env(
    advantages: torch.Tensor, env_ids: torch.Tensor, loss_mask: torch.Tensor, eps: float = 1e-6
) -> torch.Tensor:
    """`advantages` ``[B, S]`` with each env's (rows sharing an `env_ids` value) divided by
    their population std over its generated tokens (an env whose advantages are all equal is
    left as it is)."""
    out = advantages.clone()
    mask = loss_mask > 0
    for env in torch.unique(env_ids):
        rows = (env_ids == env).unsqueeze(1) & mask
        values = advantages[rows].to(torch.float64)
        if values.numel() > 1:
            std = float(values.std(unbiased=False))
            if std > eps:
                out[rows] = (values / std).to(out.dtype)
    return out


def compute_advantages(
    estimator: Estimator,
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    eps: float = 1e-6,
    gamma: float = 1.0,
    unbiased_std: bool = True,
    dp_sum: DpSum | None = None,
    episode_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token advantages ``[B, S]`` float32, zero where ``loss_mask`` is 0.

    ``dp_sum`` makes REINFORCE++ whitening global over data-parallel ranks; the group
    estimators need no reduction (every rank holds whole groups).
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown advantage estimator {estimator!r}; expected one of {ESTIMATORS}")
    if loss_mask.dim() != 2 or loss_mask.shape[0] != rewards.shape[0]:
        raise ValueError(
            f"loss_mask must be [B, S] with B = {rewards.shape[0]}; got {tuple(loss_mask.shape)}"
        )
    if estimator == "reinforce_plus_plus":
        return reinforce_plus_plus(
            rewards, loss_mask, gamma=gamma, eps=eps, unbiased_std=unbiased_std, dp_sum=dp_sum
        )

    def score(r: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        if estimator == "rloo":
            return leave_one_out(r, g)
        return group_normalized(
            r, g, divide_by_std=estimator == "grpo", eps=eps, unbiased_std=unbiased_std
        )

    if episode_ids is None:
        scores = score(rewards, group_ids)
    else:
        first, inverse = first_of_each(episode_ids)
        scores = score(rewards[first], group_ids[first])[inverse]
    return scores.to(loss_mask.device).unsqueeze(1) * loss_mask.to(torch.float32)
