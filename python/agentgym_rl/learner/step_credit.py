"""Step-level credit: each turn judged against the turns of its group that acted from the same
state (GiGPO's anchor states), on top of the episode's advantage.

Contract. `turns_of(rows)` reads, per collated row (`batch.usable_samples(groups)`, in row
order), its group's place, its turn spans and per turn a reward and a state key: the sample's
`turn_rewards` (schema version 2), or without them the whole reward on the last turn; its
`turn_keys`, or without them no key (such a turn shares its state with no other); and its
episode (`batch.episode_ids`: the rows of an episode trained as several samples, one per turn with
step-wise context, are its turns in row order). `step_advantages(turns, turn_gamma=...)` gives per
row one advantage per turn: the turn's return `G_t = r_t + turn_gamma * G_{t+1}` (its own reward,
then the later turns' of its episode, discounted across turns) minus the mean return of its step group (the turns of the same group with the same key),
divided by that group's standard deviation + `eps` (unless `divide_by_std` is off; the sample
std, n - 1, unless `unbiased_std` is off, as GRPO's). A step group of one turn gives 0: nothing
to compare with. `token_advantages(turns, per_turn, width)` spreads them over the turns' trained
tokens in the learner's shifted alignment (`batch.py`: a token generated at position i is
trained at i - 1), `[B, width]` float32, zero elsewhere. `add_step_credit(advantages, loss_mask,
turns, config)` is what the learner does with them: the episode advantages `[B, S]` plus
`config.weight` times the step advantages on the trained tokens (`config.learn.StepCreditConfig`).
`shared_state_share(turns)` is the share of keyed turns whose step group holds two or more:
the turns step credit can judge at all (the learner logs it, `step_group_share`), and
`shared_state_share_by_turn` the same by turn index (`step_group_share_by_turn`);
`step_group_sizes` gives each turn's step group size (the trained-sample log keeps it).

Worked example (one group, keys: A is the first observation both episodes read):
episode 1 turns (A, r=0) (B, r=1); episode 2 turns (A, r=0) (C, r=0) (B, r=0), gamma 1.
Returns: episode 1 [1, 1], episode 2 [0, 0, 0]. Step groups: A {1, 0} -> +-0.707 (mean 0.5,
std 0.707); B {1 (episode 1), 0 (episode 2's third turn)} -> +-0.707; C alone -> 0.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from agentgym_rl.config.learn import StepCreditConfig
from agentgym_rl.wire.types import WireSample, episode_ids, turns_before

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RowTurns:
    """One row's turns: its group's place, spans `[k, 2]` (token positions), rewards `[k]`,
    state keys `[k]` (None: not given) and its episode."""

    group: int
    spans: npt.NDArray[np.int64]
    rewards: Floats
    keys: npt.NDArray[np.int64] | None
    episode: int | None = None
    """The row's episode's place in the step (None: the row is an episode of its own)."""
    first_turn: int = 0
    """The index in its episode of the row's first turn (`wire.types.turns_before`)."""


def turns_of(rows: Sequence[tuple[int, WireSample]]) -> list[RowTurns]:
    """See the module docstring."""
    out = []
    places = zip(rows, episode_ids(rows), turns_before(rows), strict=True)
    for (group, s), episode, first in places:
        spans = np.asarray(s.tokens.turn_spans, np.int64).reshape(-1, 2)
        k = spans.shape[0]
        if s.turn_rewards.size == k and k:
            rewards = np.asarray(s.turn_rewards, np.float64)
        else:
            rewards = np.zeros(k, np.float64)
            if k:
                rewards[-1] = s.reward
        keys = np.asarray(s.turn_keys, np.int64) if s.turn_keys.size == k and k else None
        out.append(RowTurns(group, spans, rewards, keys, episode, first))
    return out


def turn_returns(rewards: Floats, turn_gamma: float) -> Floats:
    """`G_t = r_t + turn_gamma * G_{t+1}` for each turn."""
    out = np.zeros_like(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + turn_gamma * running
        out[t] = running
    return out


def step_advantages(
    turns: Sequence[RowTurns],
    *,
    turn_gamma: float = 1.0,
    divide_by_std: bool = True,
    eps: float = 1e-6,
    unbiased_std: bool = True,
) -> list[Floats]:
    """Per row, one advantage per turn (see the module docstring)."""
    returns = _episode_returns(turns, turn_gamma)
    members: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for row, r in enumerate(turns):
        if r.keys is not None:
            for t, key in enumerate(r.keys.tolist()):
                members[(r.group, key)].append((row, t))
    out = [np.zeros(len(g)) for g in returns]
    for places in members.values():
        if len(places) < 2:
            continue
        values = np.array([returns[row][t] for row, t in places])
        centred = values - values.mean()
        if divide_by_std:
            centred = centred / (values.std(ddof=1 if unbiased_std else 0) + eps)
        for (row, t), value in zip(places, centred, strict=True):
            out[row][t] = value
    return out


def step_group_sizes(turns: Sequence[RowTurns]) -> list[list[int]]:
    """Per row, per turn: how many turns its step group holds (itself included; 0: no key)."""
    sizes = Counter((r.group, k) for r in turns if r.keys is not None for k in r.keys.tolist())
    return [
        [sizes[(r.group, k)] for k in r.keys.tolist()]
        if r.keys is not None
        else [0] * len(r.rewards)
        for r in turns
    ]


def shared_state_share(turns: Sequence[RowTurns]) -> float | None:
    """See the module docstring; None when no turn has a state key."""
    sizes = [n for row in step_group_sizes(turns) for n in row if n]
    return sum(n >= 2 for n in sizes) / len(sizes) if sizes else None


def shared_state_share_by_turn(turns: Sequence[RowTurns], bins: int) -> dict[str, float]:
    """`shared_state_share` by the turn's index in its episode (1-based; bin `bins` takes every
    later turn), over keyed turns: which turns step credit can judge (the first, shared by
    every episode of a group, always can)."""
    keyed, shared = [0] * bins, [0] * bins
    for row, r in zip(step_group_sizes(turns), turns, strict=True):
        for t, n in enumerate(row, r.first_turn):
            if n:
                keyed[min(t, bins - 1)] += 1
                shared[min(t, bins - 1)] += n >= 2
    return {
        str(k + 1): round(s / n, 4) for k, (s, n) in enumerate(zip(shared, keyed, strict=True)) if n
    }


def _episode_returns(turns: Sequence[RowTurns], turn_gamma: float) -> list[Floats]:
    """Per row, its turns' returns, discounted across every later turn of its episode."""
    episodes: dict[tuple[int, int], list[int]] = defaultdict(list)
    for row, r in enumerate(turns):
        episodes[(0, r.episode) if r.episode is not None else (1, row)].append(row)
    out: list[Floats] = [np.zeros(0)] * len(turns)
    for rows in episodes.values():
        joined = turn_returns(np.concatenate([turns[row].rewards for row in rows]), turn_gamma)
        cuts = np.cumsum([len(turns[row].rewards) for row in rows])[:-1]
        for row, part in zip(rows, np.split(joined, cuts), strict=True):
            out[row] = part
    return out


def token_advantages(
    turns: Sequence[RowTurns], per_turn: Sequence[Floats], width: int
) -> npt.NDArray[np.float32]:
    """`[B, width]`: each turn's advantage on its tokens, shifted one left (the learner's
    alignment); the caller masks it with the shifted loss mask."""
    out = np.zeros((len(turns), width), np.float32)
    for row, (r, values) in enumerate(zip(turns, per_turn, strict=True)):
        for (start, end), value in zip(r.spans.tolist(), values.tolist(), strict=True):
            lo, hi = max(start - 1, 0), min(end - 1, width)
            if hi > lo:
                out[row, lo:hi] = value
    return out


def add_step_credit(
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    turns: Sequence[RowTurns],
    config: StepCreditConfig,
    *,
    eps: float = 1e-6,
    unbiased_std: bool = True,
) -> torch.Tensor:
    """`advantages` + `config.weight` x the step advantages of `turns` (`turns_of(rows)`) on
    the trained tokens."""
    per_turn = step_advantages(
        turns,
        turn_gamma=config.turn_gamma,
        divide_by_std=config.divide_by_std,
        eps=eps,
        unbiased_std=unbiased_std,
    )
    steps = torch.from_numpy(token_advantages(turns, per_turn, loss_mask.shape[1]))
    return advantages + config.weight * steps.to(advantages.device) * loss_mask


__all__ = [
    "RowTurns",
    "add_step_credit",
    "shared_state_share",
    "shared_state_share_by_turn",
    "step_advantages",
    "step_group_sizes",
    "token_advantages",
    "turn_returns",
    "turns_of",
]
