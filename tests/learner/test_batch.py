"""Collation: label shift, padding, exclusion of failed samples, micro-batch splitting."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import torch

from agentgym_rl.config.learn import Aggregation, LossConfig
from agentgym_rl.learner.advantages import compute_advantages, terminal_rewards
from agentgym_rl.learner.batch import Batch, collate
from agentgym_rl.learner.losses import policy_loss
from agentgym_rl.wire.types import Status, WireGroup, WireSample, WireTokens

PAD = 0


def sample(
    ids: list[int],
    mask: list[int],
    logprobs: list[float] | None = None,
    versions: list[int] | None = None,
    reward: float = 0.0,
    status: Status = Status.DONE,
) -> WireSample:
    n = len(ids)
    tokens = WireTokens(
        input_ids=np.asarray(ids, dtype=np.uint32),
        loss_mask=np.asarray(mask, dtype=np.uint8),
        logprobs=np.asarray(logprobs if logprobs is not None else [0.0] * n, dtype=np.float32),
        versions=np.asarray(versions if versions is not None else [0] * n, dtype=np.uint32),
        turn_spans=np.zeros((0, 2), dtype=np.uint32),
    )
    return WireSample(tokens, reward, status, False, 1, 10, 0, 0)


# The module docstring's worked example: prompt P1 P2, generated G1 G2, observation O1, G3.
EXAMPLE = sample(
    [11, 12, 21, 22, 31, 23],
    [0, 0, 1, 1, 0, 1],
    [0.0, 0.0, -0.1, -0.2, 0.0, -0.3],
    [0, 0, 5, 5, 0, 6],
    reward=1.0,
)


def test_label_shift_worked_example() -> None:
    b = collate([WireGroup(3, "t", "babyai", [EXAMPLE])])
    assert b.input_ids.tolist() == [[11, 12, 21, 22, 31, 23]]
    assert b.labels.tolist() == [[12, 21, 22, 31, 23, PAD]]
    assert b.loss_mask.tolist() == [[0, 1, 1, 0, 1, 0]]
    torch.testing.assert_close(b.behaviour_logprobs, torch.tensor([[0, -0.1, -0.2, 0, -0.3, 0]]))
    assert b.versions.tolist() == [[0, 5, 5, 0, 6, 0]]
    assert b.position_ids.tolist() == [[0, 1, 2, 3, 4, 5]]
    assert b.attention_mask.tolist() == [[True] * 6]
    assert b.input_ids.dtype == torch.int64 and b.labels.dtype == torch.int64
    # every trained position predicts a generated token, read one step ahead
    for pos in torch.nonzero(b.loss_mask[0]).flatten().tolist():
        assert EXAMPLE.tokens.loss_mask[pos + 1] == 1
        assert b.labels[0, pos] == int(EXAMPLE.tokens.input_ids[pos + 1])


def test_reward_on_last_generated_label_after_shift() -> None:
    b = collate([WireGroup(3, "t", "babyai", [EXAMPLE])])
    placed = terminal_rewards(b.rewards, b.loss_mask)
    assert placed.tolist() == [[0, 0, 0, 0, 1.0, 0]]  # G3 is predicted at position 4
    adv = compute_advantages("reinforce_plus_plus", b.rewards, b.group_ids, b.loss_mask)
    assert bool((adv[b.loss_mask == 0] == 0).all())


def test_padding_exclusion_rewards_and_groups() -> None:
    groups = [
        WireGroup(
            7,
            "a",
            "babyai",
            [
                sample([1, 2, 3], [0, 1, 1], reward=1.0),
                sample([1, 2], [0, 1], status=Status.ENV_FAILURE),
                sample([1, 2, 3, 4, 5], [0, 1, 1, 1, 1], reward=0.5, status=Status.TRUNCATED),
            ],
        ),
        WireGroup(9, "b", "babyai", [sample([4, 5], [0, 1], status=Status.ABORTED)]),
        WireGroup(9, "b", "babyai", [sample([6, 7], [0, 1], reward=-1.0, status=Status.TURN_CAP)]),
    ]
    b = collate(groups, pad_token_id=PAD, pad_multiple=4)
    assert b.excluded == {"env_failure": 1, "aborted": 1}
    assert len(b) == 3 and b.input_ids.shape == (3, 8)  # longest 5 rounded up to 8
    assert b.rewards.tolist() == [1.0, 0.5, -1.0]
    assert b.group_ids.tolist() == [0, 0, 2]  # each group's place in the step
    assert b.lengths.tolist() == [3, 5, 2]
    assert b.input_ids[0].tolist() == [1, 2, 3, 0, 0, 0, 0, 0]
    assert b.labels[0].tolist() == [2, 3, 0, 0, 0, 0, 0, 0]
    assert b.loss_mask[0].tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    assert b.position_ids[0].tolist() == list(range(8))  # RoPE needs 0..W-1 on every row
    assert b.attention_mask[2].tolist() == [True, True] + [False] * 6
    assert b.num_loss_tokens == 2 + 4 + 1 and b.num_seqs == 3


def test_all_excluded_gives_empty_batch() -> None:
    b = collate([WireGroup(1, "a", "x", [sample([1, 2], [0, 1], status=Status.ABORTED)])])
    assert len(b) == 0 and b.split(100) == []
    assert b.excluded == {"aborted": 1}


def lengths_batch(lengths: list[int], pad_multiple: int = 1) -> Batch:
    samples = [sample(list(range(1, n + 1)), [0] + [1] * (n - 1), reward=float(n)) for n in lengths]
    return collate([WireGroup(0, "t", "x", samples)], pad_multiple=pad_multiple)


def test_split_by_token_budget() -> None:
    b = lengths_batch([6, 3, 2, 5])
    mbs = b.split(12)
    # longest first: [6, 5] -> 2 x 6 = 12 tokens; [3, 2] -> 2 x 3 = 6 tokens
    assert [mb.row_ids.tolist() for mb in mbs] == [[0, 3], [1, 2]]
    assert [tuple(mb.input_ids.shape) for mb in mbs] == [(2, 6), (2, 3)]
    assert all(mb.input_ids.numel() <= 12 for mb in mbs)
    assert mbs[1].labels.tolist() == [[2, 3, 0], [2, 0, 0]]
    # a row longer than the budget gets a micro-batch of its own
    assert [mb.row_ids.tolist() for mb in b.split(4)] == [[0], [3], [1], [2]]


def test_split_weighs_padding_against_a_micro_batch_s_overhead() -> None:
    b = lengths_batch([3, 10, 3, 9])  # longest first: 10, 9, 3, 3
    # the fewest micro-batches: one of 4 x 10 = 40 tokens computed for 25 real
    assert [mb.row_ids.tolist() for mb in b.split(40)] == [[1, 3, 0, 2]]
    # a micro-batch worth 10 tokens: [10, 9] and [3, 3] compute 26 + 2 x 10 < 40 + 10
    assert [mb.row_ids.tolist() for mb in b.split(40, 10)] == [[1, 3], [0, 2]]
    # worth 20: 26 + 2 x 20 > 40 + 20, one again
    assert len(b.split(40, 20)) == 1
    # worth nothing: no padding at all, whatever the count
    assert [mb.row_ids.tolist() for mb in b.split(40, 0)] == [[1], [3], [0, 2]]


@pytest.mark.parametrize("overhead", [None, 0, 3, 17])
def test_split_cuts_where_an_exhaustive_search_finds_the_least_cost(overhead: int | None) -> None:
    """Every way to cut the sorted rows into contiguous micro-batches within the budget, priced
    as the split prices them: the split's cut is one of the cheapest."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        lengths = [int(x) for x in rng.integers(1, 12, size=int(rng.integers(1, 8)))]
        budget, multiple = int(rng.integers(8, 40)), int(rng.choice([1, 2, 4]))
        b = lengths_batch(lengths, pad_multiple=multiple)
        widths = sorted((-(-n // multiple) * multiple for n in lengths), reverse=True)

        def price(runs: list[list[int]]) -> tuple[int, int]:
            computed = sum(len(r) * r[0] for r in runs)
            if overhead is None:
                return (len(runs), computed)
            return (computed + overhead * len(runs), len(runs))

        options = []
        for mask in range(2 ** (len(widths) - 1)):
            cuts = [0, *(i + 1 for i in range(len(widths) - 1) if mask >> i & 1), len(widths)]
            runs = [widths[a:z] for a, z in itertools.pairwise(cuts)]
            if all(len(r) * r[0] <= budget or len(r) == 1 for r in runs):
                options.append(price(runs))
        mbs = b.split(budget, overhead)
        got = [[int(b.lengths[i]) for i in mb.row_ids] for mb in mbs]
        got_widths = [[-(-n // multiple) * multiple for n in r] for r in got]
        assert [n for r in got for n in r] == sorted(lengths, reverse=True)
        assert all(mb.input_ids.numel() <= budget or len(mb) == 1 for mb in mbs)
        assert price(got_widths) == min(options), (lengths, budget, multiple)


def test_split_pads_to_multiple_and_carries_advantages() -> None:
    b = lengths_batch([6, 3, 2, 5], pad_multiple=4)
    adv = compute_advantages("grpo", b.rewards, b.group_ids, b.loss_mask)
    b = dataclasses.replace(b, advantages=adv)
    mbs = b.split(16)
    assert [tuple(mb.input_ids.shape) for mb in mbs] == [(2, 8), (2, 4)]
    for mb in mbs:
        assert mb.advantages is not None
        torch.testing.assert_close(mb.advantages, adv[mb.row_ids, : mb.input_ids.shape[1]])


def test_micro_batch_losses_sum_to_full_batch_loss() -> None:
    b = lengths_batch([6, 3, 2, 5])
    adv = compute_advantages("dr_grpo", b.rewards, b.group_ids, b.loss_mask)
    b = dataclasses.replace(b, advantages=adv)
    gen = torch.Generator().manual_seed(0)
    cur = b.behaviour_logprobs + 0.1 * torch.randn(b.loss_mask.shape, generator=gen)
    modes: tuple[Aggregation, ...] = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")
    for agg in modes:
        cfg = LossConfig(aggregation=agg)
        full, _ = policy_loss(
            cfg,
            logprobs=cur,
            behaviour_logprobs=b.behaviour_logprobs,
            advantages=adv,
            loss_mask=b.loss_mask,
        )
        total = torch.zeros(())
        for mb in b.split(12):
            assert mb.advantages is not None
            s = mb.input_ids.shape[1]
            part, _ = policy_loss(
                cfg,
                logprobs=cur[mb.row_ids, :s],
                behaviour_logprobs=mb.behaviour_logprobs,
                advantages=mb.advantages,
                loss_mask=mb.loss_mask,
                global_tokens=b.num_loss_tokens,
                global_seqs=b.num_seqs,
            )
            total = total + part
        torch.testing.assert_close(total, full, atol=1e-6, rtol=0)


def test_groups_with_equal_ids_stay_separate_groups() -> None:
    # two rollout servers (or one restarted) may send the same group id in one step
    groups = [
        WireGroup(3, "a", "babyai", [sample([1, 2], [0, 1], reward=1.0), sample([1, 3], [0, 1])]),
        WireGroup(3, "b", "babyai", [sample([4, 5], [0, 1]), sample([4, 6], [0, 1])]),
    ]
    b = collate(groups, pad_token_id=PAD)
    assert b.group_ids.tolist() == [0, 0, 1, 1]
    adv = compute_advantages("grpo", b.rewards, b.group_ids, b.loss_mask)
    assert adv[2].abs().sum() == 0 and adv[3].abs().sum() == 0  # group b: no signal
    assert adv[0].sum() > 0 > adv[1].sum()
