"""Decoded groups -> padded, label-shifted training tensors and token-budgeted micro-batches.

Contract. `collate` takes decoded `WireGroup`s and returns one `Batch` holding every usable
sample (``env_failure`` and ``aborted`` samples are excluded and counted in
``Batch.excluded``), padded on the right to a common length that is a multiple of
``pad_multiple`` (tensor/sequence parallel). Advantages need whole groups (GRPO, RLOO) or the
whole batch (REINFORCE++ whitening), so the learner computes them on this `Batch` (attach them
with ``dataclasses.replace(batch, advantages=...)``) and only then calls `Batch.split`, which
packs rows into micro-batches of at most ``token_budget`` padded tokens (rows x padded length;
a row longer than the budget gets a micro-batch of its own), each trimmed to its own padded
length, again a multiple of ``pad_multiple``. Sum the micro-batch losses computed with the
whole batch's ``num_loss_tokens`` / ``num_seqs`` as ``global_tokens`` / ``global_seqs``
(`losses.policy_loss`) to get the step's loss exactly.

Shift convention (next-token prediction). The model reads ``input_ids[t]`` and its logits at
position t predict token t + 1, so every per-token quantity about *which token was produced* is
moved one step left: ``labels[t] = ids[t + 1]``, ``loss_mask[t] = mask[t + 1]``,
``behaviour_logprobs[t] = logprobs[t + 1]``, ``versions[t] = versions[t + 1]``. The last real
position and all padding get label ``pad_token_id``, mask 0, log-prob 0, version 0.
Worked example, prompt ``P1 P2``, generated ``G1 G2``, observation ``O1``, generated ``G3``::

    position t      0    1    2    3    4    5
    ids            P1   P2   G1   G2   O1   G3
    wire mask       0    0    1    1    0    1
    wire logprob    0    0   a1   a2    0   a3
    labels         P2   G1   G2   O1   G3  pad
    loss_mask       0    1    1    0    1    0
    behaviour lp    0   a1   a2    0   a3    0

Position 1 (reading ``P2``) is trained to produce ``G1`` with behaviour log-prob ``a1``; the last
generated token ``G3`` is predicted at position 4, which is where REINFORCE++ puts the reward when
given this shifted mask. ``position_ids`` are ``0..W-1`` on every row, padding included (Megatron's
RoPE rotates by column index; padding sits after the real tokens, so causal attention never lets
a real token see it, and its labels are masked);
``attention_mask`` is True on real tokens.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from agentgym_rl.wire.types import Status, WireGroup, WireSample, episode_ids

EXCLUDED_STATUSES: frozenset[Status] = frozenset({Status.ENV_FAILURE, Status.ABORTED})


@dataclass(frozen=True)
class Batch:
    """Padded training tensors; per-token fields are ``[B, S]``, per-sample fields ``[B]``."""

    input_ids: torch.Tensor  # int64
    position_ids: torch.Tensor  # int64
    attention_mask: torch.Tensor  # bool, True on real tokens
    labels: torch.Tensor  # int64, input_ids shifted left by one
    loss_mask: torch.Tensor  # float32, shifted: 1 where labels[t] was generated
    behaviour_logprobs: torch.Tensor  # float32, shifted engine log-probs of labels
    versions: torch.Tensor  # int64, shifted policy versions of labels
    lengths: torch.Tensor  # int64 [B], real tokens per row
    rewards: torch.Tensor  # float32 [B]
    group_ids: torch.Tensor  # int64 [B], the row's group's place in the step
    episode_ids: torch.Tensor  # int64 [B], the row's episode's place in the step (`episode_ids`)
    env_ids: torch.Tensor  # int64 [B], the row's env's place in the step's sorted env names
    row_ids: torch.Tensor  # int64 [B], row index in the collated batch (kept through split)
    pad_multiple: int = 1  # S (and every micro-batch's S) is a multiple of this
    advantages: torch.Tensor | None = None  # float32 [B, S], attached by the learner
    excluded: dict[str, int] = field(default_factory=dict)  # status -> samples dropped

    @property
    def num_loss_tokens(self) -> int:
        return int(self.loss_mask.sum().item())

    @property
    def num_seqs(self) -> int:
        """Rows with at least one generated label (the aggregation's sequence count)."""
        return int((self.loss_mask.sum(dim=1) > 0).sum().item())

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def select(self, rows: Sequence[int]) -> Batch:
        """The given rows, trimmed to their longest length rounded up to ``pad_multiple``."""
        idx = torch.as_tensor(list(rows), dtype=torch.int64)
        longest = int(self.lengths[idx].max().item()) if len(idx) else 0
        s = min(_round_up(max(longest, 1), self.pad_multiple), self.input_ids.shape[1])
        per_token = {
            name: getattr(self, name)[idx, :s]
            for name in (
                "input_ids",
                "position_ids",
                "attention_mask",
                "labels",
                "loss_mask",
                "behaviour_logprobs",
                "versions",
            )
        }
        adv = None if self.advantages is None else self.advantages[idx, :s]
        return replace(
            self,
            **per_token,
            lengths=self.lengths[idx],
            rewards=self.rewards[idx],
            group_ids=self.group_ids[idx],
            episode_ids=self.episode_ids[idx],
            env_ids=self.env_ids[idx],
            row_ids=self.row_ids[idx],
            advantages=adv,
        )

    def split(self, token_budget: int, overhead_tokens: int | None = None) -> list[Batch]:
        """Micro-batches of at most ``token_budget`` padded tokens: the rows longest first, cut
        where the padded tokens computed plus ``overhead_tokens`` per micro-batch (its fixed
        cost, in tokens) are fewest; None: the fewest micro-batches, then the least padding."""
        if token_budget <= 0:
            raise ValueError("token_budget must be > 0")
        order = sorted(range(len(self)), key=lambda i: -int(self.lengths[i]))
        widths = [_round_up(max(int(self.lengths[i]), 1), self.pad_multiple) for i in order]
        cuts = _cheapest_cuts(widths, token_budget, overhead_tokens)
        return [self.select(order[a:b]) for a, b in itertools.pairwise(cuts)]


def _cheapest_cuts(widths: list[int], budget: int, overhead: int | None) -> list[int]:
    """Where to cut rows of non-increasing padded `widths` into runs (a run computes its count
    times its first width, at most `budget` unless it is one row): [0, ..., len] with the least
    computed plus `overhead` per run (then the fewest runs), or with None the fewest runs, then
    the least computed. Dynamic programming over the last run ending at each row."""

    def price(runs: int, computed: int) -> tuple[int, int]:
        return (runs, computed) if overhead is None else (computed + overhead * runs, runs)

    n = len(widths)
    best = [(0, 0)] * (n + 1)  # (runs, computed) of the cheapest cuts of rows[:j]
    start = [0] * (n + 1)  # where that cut's last run starts
    for j in range(1, n + 1):
        options = []
        for i in range(j - 1, -1, -1):  # the last run rows[i:j]; earlier i: wider and longer
            size = (j - i) * widths[i]
            if size > budget and i < j - 1:
                break
            options.append(((best[i][0] + 1, best[i][1] + size), i))
        best[j], start[j] = min(options, key=lambda o: price(*o[0]))
    cuts = [n]
    while cuts[-1] > 0:
        cuts.append(start[cuts[-1]])
    return cuts[::-1]


def _round_up(n: int, multiple: int) -> int:
    if multiple <= 0:
        raise ValueError("pad_multiple must be > 0")
    return -(-n // multiple) * multiple


def usable_samples(groups: Sequence[WireGroup]) -> list[tuple[int, WireSample]]:
    """The samples `collate` keeps, in row order, each with its group's place in `groups`."""
    # a group's place in this step, not its id: ids are only unique per rollout server (two
    # servers, or one restarted, may send equal ids in one step, and GRPO must not merge them)
    return [
        (index, s)
        for index, g in enumerate(groups)
        for s in g.samples
        if s.status not in EXCLUDED_STATUSES
    ]


def _excluded(groups: Sequence[WireGroup]) -> dict[str, int]:
    counts = Counter(
        s.status.value for g in groups for s in g.samples if s.status in EXCLUDED_STATUSES
    )
    return dict(counts)


def collate(groups: Sequence[WireGroup], *, pad_token_id: int = 0, pad_multiple: int = 1) -> Batch:
    """One padded, label-shifted `Batch` of every usable sample (see the module docstring)."""
    kept, excluded = usable_samples(groups), _excluded(groups)
    envs = sorted({g.env for g in groups})
    b = len(kept)
    lengths = [len(s.tokens) for _, s in kept]
    width = _round_up(max([*lengths, 1]), pad_multiple)
    input_ids = np.full((b, width), pad_token_id, dtype=np.int64)
    labels = np.full((b, width), pad_token_id, dtype=np.int64)
    position_ids = np.tile(np.arange(width, dtype=np.int64), (b, 1))
    loss_mask = np.zeros((b, width), dtype=np.float32)
    logprobs = np.zeros((b, width), dtype=np.float32)
    versions = np.zeros((b, width), dtype=np.int64)
    for row, ((_, s), n) in enumerate(zip(kept, lengths, strict=True)):
        t = s.tokens
        if not (len(t.loss_mask) == len(t.logprobs) == len(t.versions) == n):
            raise ValueError(f"sample {row}: per-token arrays disagree in length")
        input_ids[row, :n] = t.input_ids
        if n > 1:
            labels[row, : n - 1] = t.input_ids[1:]
            loss_mask[row, : n - 1] = t.loss_mask[1:]
            logprobs[row, : n - 1] = t.logprobs[1:]
            versions[row, : n - 1] = t.versions[1:]
    logprobs = np.where(loss_mask > 0, logprobs, np.float32(0.0))  # only generated labels
    lengths_t = torch.as_tensor(lengths, dtype=torch.int64)
    return Batch(
        input_ids=torch.from_numpy(input_ids),
        position_ids=torch.from_numpy(position_ids),
        attention_mask=torch.arange(width).unsqueeze(0) < lengths_t.unsqueeze(1),
        labels=torch.from_numpy(labels),
        loss_mask=torch.from_numpy(loss_mask),
        behaviour_logprobs=torch.from_numpy(logprobs),
        versions=torch.from_numpy(versions),
        lengths=lengths_t,
        rewards=torch.tensor([s.reward for _, s in kept], dtype=torch.float32),
        group_ids=torch.tensor([gid for gid, _ in kept], dtype=torch.int64),
        episode_ids=torch.tensor(episode_ids(kept), dtype=torch.int64),
        env_ids=torch.tensor([envs.index(groups[gid].env) for gid, _ in kept], dtype=torch.int64),
        row_ids=torch.arange(b, dtype=torch.int64),
        pad_multiple=pad_multiple,
        excluded=excluded,
    )
