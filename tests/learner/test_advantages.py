"""Advantage estimators against hand-computed values (tiny tensors, CPU)."""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from agentgym_rl.learner.advantages import (
    compute_advantages,
    discounted_returns,
    group_normalized,
    leave_one_out,
    reinforce_plus_plus,
    terminal_rewards,
)

EPS = 1e-6
SQRT_THIRD = math.sqrt(1.0 / 3.0)  # sample std of [1, 0, 0, 1]: sqrt((4 * 0.25) / 3)


def t(x: list) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float32)


def ids(x: list[int]) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.int64)


def close(a: torch.Tensor, b: list | torch.Tensor) -> None:
    torch.testing.assert_close(a, b if isinstance(b, torch.Tensor) else t(b), atol=1e-6, rtol=0)


def test_grpo_sample_std_one_group() -> None:
    # mean 0.5, sample std sqrt(1/3) = 0.57735: +-0.5 / 0.577351 = +-0.866024
    a = 0.5 / (SQRT_THIRD + EPS)
    assert a == pytest.approx(0.866024, abs=1e-6)
    close(group_normalized(t([1, 0, 0, 1]), ids([0, 0, 0, 0])), [a, -a, -a, a])


def test_grpo_population_std_option() -> None:
    # population std of [1, 0, 0, 1] is 0.5: +-0.5 / 0.500001 = +-0.999998
    a = 0.5 / (0.5 + EPS)
    got = group_normalized(t([1, 0, 0, 1]), ids([0, 0, 0, 0]), unbiased_std=False)
    close(got, [a, -a, -a, a])


def test_grpo_several_groups_interleaved_and_degenerate() -> None:
    # group 7: [1, 0, 0, 1]; group 3: [3, 1] (mean 2, sample std sqrt(2)); group 9: [2, 2]
    # (zero variance -> 0); group 5: a single sample -> 0.
    rewards = t([1, 3, 0, 2, 0, 1, 2, 1, 4])
    groups = ids([7, 3, 7, 9, 7, 3, 9, 7, 5])
    a = 0.5 / (SQRT_THIRD + EPS)
    b = 1.0 / (math.sqrt(2.0) + EPS)  # 0.707106
    close(group_normalized(rewards, groups), [a, b, -a, 0, -a, -b, 0, a, 0])


def test_dr_grpo_no_std_division() -> None:
    got = compute_advantages(
        "dr_grpo", t([1, 0, 0, 1, 3, 1]), ids([0, 0, 0, 0, 1, 1]), torch.ones(6, 2)
    )
    close(got, [[0.5] * 2, [-0.5] * 2, [-0.5] * 2, [0.5] * 2, [1.0] * 2, [-1.0] * 2])


def test_rloo_leave_one_out() -> None:
    # [1, 0, 0, 1]: 1 - (0 + 0 + 1) / 3 = 2/3 and 0 - (1 + 0 + 1) / 3 = -2/3; [3, 1]: +-2
    got = leave_one_out(t([1, 0, 0, 1, 3, 1]), ids([4, 4, 4, 4, 2, 2]))
    close(got, [2 / 3, -2 / 3, -2 / 3, 2 / 3, 2.0, -2.0])


def test_rloo_needs_two_samples_per_group() -> None:
    with pytest.raises(ValueError, match=r"rloo needs at least 2 .*\[11\]"):
        leave_one_out(t([1, 0, 5]), ids([4, 4, 11]))


def test_broadcast_zero_where_masked() -> None:
    mask = t([[0, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    a = 0.5 / (SQRT_THIRD + EPS)
    got = compute_advantages("grpo", t([1, 0, 0, 1]), ids([0, 0, 0, 0]), mask)
    close(got, [[0, a, a, 0], [-a, 0, 0, 0], [0, 0, 0, 0], [a, a, a, a]])
    assert got.dtype == torch.float32


def test_terminal_reward_on_last_generated_token_multi_turn() -> None:
    # two turns, observation tokens (and padding) after the last generated token: the reward must
    # land on index 6 (last mask == 1), never on the trailing observation tokens 7, 8.
    mask = t([[0, 1, 1, 0, 0, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0, 0], [0] * 9])
    got = terminal_rewards(t([2.5, -1.0, 7.0]), mask)
    expected = torch.zeros(3, 9)
    expected[0, 6] = 2.5
    expected[1, 1] = -1.0  # the third row has no generated token: no reward anywhere
    close(got, expected)
    assert bool((got[mask == 0] == 0).all())


def test_discounted_returns_skip_masked_tokens() -> None:
    # gamma 0.5 over generated positions 0, 1, 3 (position 2 is an observation): 0.25, 0.5, -, 1
    got = discounted_returns(t([1.0]), t([[1, 1, 0, 1, 0]]), gamma=0.5)
    close(got, [[0.25, 0.5, 0.0, 1.0, 0.0]])
    # gamma 1 (default): every generated token gets the full reward
    close(discounted_returns(t([3.0]), t([[0, 1, 0, 1, 0]])), [[0, 3, 0, 3, 0]])


def test_reinforce_plus_plus_global_whitening() -> None:
    # returns: row0 [1, 1, -], row1 [0, -, -]; unmasked values [1, 1, 0]: mean 2/3,
    # sample std sqrt(((1/3)^2 * 2 + (2/3)^2) / 2) = sqrt(1/3)
    mask = t([[1, 1, 0], [1, 0, 0]])
    got = reinforce_plus_plus(t([1.0, 0.0]), mask)
    hi = (1 - 2 / 3) / (SQRT_THIRD + EPS)  # 0.577349
    lo = (0 - 2 / 3) / (SQRT_THIRD + EPS)  # -1.154699
    close(got, [[hi, hi, 0], [lo, 0, 0]])
    # whitened over unmasked tokens: mean 0
    assert float(got[mask.bool()].mean()) == pytest.approx(0.0, abs=1e-6)


def test_reinforce_plus_plus_multi_turn_trailing_observation() -> None:
    # the reference drops the terminal reward on a masked observation token; here the reward of
    # row 0 reaches its generated tokens, and masked tokens stay exactly 0 after whitening.
    mask = t([[1, 1, 0, 0, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0]])
    got = compute_advantages("reinforce_plus_plus", t([1.0, 0.0]), ids([0, 0]), mask)
    # values [1, 1, 1, 0, 0, 0]: mean 0.5, sample std sqrt(6 * 0.25 / 5) = sqrt(0.3)
    a = 0.5 / (math.sqrt(0.3) + EPS)
    close(got, [[a, a, 0, 0, a, 0, 0], [-a, -a, -a, 0, 0, 0, 0]])
    assert bool((got[mask == 0] == 0).all())


class ThreadSum:
    """`dp_sum` for `ranks` threads standing in for data-parallel ranks: barrier, then sum."""

    def __init__(self, ranks: int) -> None:
        self.barrier = threading.Barrier(ranks)
        self.parts: dict[int, torch.Tensor] = {}
        self.lock = threading.Lock()

    def for_rank(self, rank: int):  # type: ignore[no-untyped-def]
        def dp_sum(x: torch.Tensor) -> torch.Tensor:
            with self.lock:
                self.parts[rank] = x.clone()
            self.barrier.wait()
            total = sum(self.parts[r] for r in sorted(self.parts))
            self.barrier.wait()  # everyone has read before the next call overwrites
            return total  # type: ignore[return-value]

        return dp_sum


def test_reinforce_plus_plus_whitening_is_global_over_dp_ranks() -> None:
    """Two ranks with different reward scales whiten as one process holding both halves."""
    mask = t([[1, 1, 0, 1], [1, 0, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [1, 1, 0, 0]])
    rewards = t([1.0, 0.0, 3.0, 5.0, 2.0])
    want = compute_advantages("reinforce_plus_plus", rewards, ids([0] * 5), mask, gamma=0.9)
    halves = [slice(0, 2), slice(2, 5)]
    reducer = ThreadSum(2)
    with ThreadPoolExecutor(2) as pool:
        futures = [
            pool.submit(
                compute_advantages,
                "reinforce_plus_plus",
                rewards[rows],
                ids([0] * 5)[rows],
                mask[rows],
                gamma=0.9,
                dp_sum=reducer.for_rank(rank),
            )
            for rank, rows in enumerate(halves)
        ]
        got = torch.cat([f.result(timeout=30) for f in futures])
    close(got, want)
    # per-rank whitening (the old behaviour) is measurably different on this batch
    alone = reinforce_plus_plus(rewards[halves[0]], mask[halves[0]], gamma=0.9)
    assert (alone - want[halves[0]]).abs().max() > 0.1


def test_reinforce_plus_plus_empty_mask() -> None:
    close(reinforce_plus_plus(t([1.0]), t([[0, 0]])), [[0, 0]])


def test_unknown_estimator_and_bad_shapes() -> None:
    with pytest.raises(ValueError, match="unknown advantage estimator"):
        compute_advantages("ppo", t([1.0]), ids([0]), torch.ones(1, 2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="loss_mask"):
        compute_advantages("grpo", t([1.0, 2.0]), ids([0, 0]), torch.ones(3, 2))
    with pytest.raises(ValueError, match="group_ids"):
        group_normalized(t([1.0, 2.0]), ids([0]))


@pytest.mark.parametrize("estimator", ["grpo", "dr_grpo", "rloo"])
def test_an_episode_of_several_samples_counts_once_in_its_group(estimator: str) -> None:
    # one group of three episodes with rewards 1, 0, 0; the first trained as three samples
    # (step-wise parts): its parts get the score its one sample would, and so do the others
    whole = compute_advantages(estimator, t([1, 0, 0]), ids([0, 0, 0]), torch.ones(3, 1))  # type: ignore[arg-type]
    parts = compute_advantages(
        estimator,  # type: ignore[arg-type]
        t([1, 1, 1, 0, 0]),
        ids([0, 0, 0, 0, 0]),
        torch.ones(5, 1),
        episode_ids=ids([4, 4, 4, 8, 9]),
    )
    close(parts[:, 0], whole[[0, 0, 0, 1, 2], 0])
    # without episode ids the three parts would weigh three: a different baseline
    naive = compute_advantages(estimator, t([1, 1, 1, 0, 0]), ids([0] * 5), torch.ones(5, 1))  # type: ignore[arg-type]
    assert not torch.allclose(naive[:, 0], parts[:, 0])


@pytest.mark.parametrize("estimator", ["grpo", "dr_grpo", "rloo", "reinforce_plus_plus"])
def test_one_sample_episodes_score_bit_for_bit_as_before(estimator: str) -> None:
    # whole-history rows (every row its own episode, `collate` numbering them in order) must
    # train exactly as before episode ids existed: the same advantages to the last bit
    gen = torch.Generator().manual_seed(5)
    rewards = torch.rand(24, generator=gen)
    groups = torch.arange(24) // 8
    mask = (torch.rand(24, 7, generator=gen) > 0.3).to(torch.float32)
    before = compute_advantages(estimator, rewards, groups, mask)  # type: ignore[arg-type]
    now = compute_advantages(estimator, rewards, groups, mask, episode_ids=torch.arange(24))  # type: ignore[arg-type]
    assert torch.equal(before, now)
