"""Step-level credit (GiGPO-style anchor states): hand-computed groups, a written reference
formulation on random groups, and where on the tokens the step advantage lands."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import replace

import numpy as np
import pytest
import torch

from agentgym_rl.config.learn import LearnSettings, StepCreditConfig
from agentgym_rl.episode.turn import turn_shaped_rewards
from agentgym_rl.episode.types import EnvSpec
from agentgym_rl.learner.step_credit import (
    RowTurns,
    add_step_credit,
    shared_state_share,
    shared_state_share_by_turn,
    step_advantages,
    step_group_sizes,
    token_advantages,
    turn_returns,
    turns_of,
)
from agentgym_rl.wire.types import Status, WireSample, WireTokens


def _row(group: int, keys: list[int] | None, rewards: list[float]) -> RowTurns:
    k = len(rewards)
    spans = np.array([[10 * t + 2, 10 * t + 5] for t in range(k)], np.int64).reshape(-1, 2)
    return RowTurns(
        group, spans, np.array(rewards, float), None if keys is None else np.array(keys)
    )


def _sample(spans: list[tuple[int, int]], reward: float, **per_turn: list[float]) -> WireSample:
    n = max([e for _, e in spans] + [1]) + 1
    mask = np.zeros(n, np.uint8)
    for s, e in spans:
        mask[s:e] = 1
    tokens = WireTokens(
        np.arange(n, dtype=np.uint32),
        mask,
        np.zeros(n, np.float32),
        np.zeros(n, np.uint32),
        np.array(spans, np.uint32).reshape(-1, 2),
    )
    arrays = {
        "turn_rewards": np.array(per_turn.get("rewards", []), np.float32),
        "turn_keys": np.array(per_turn.get("keys", []), np.uint32),
    }
    return WireSample(tokens, reward, Status.DONE, False, len(spans), 8, 0, 0, **arrays)


def test_the_worked_example_shared_states() -> None:
    # episode 1: A (0) -> B (1); episode 2: A (0) -> C (0) -> B (0); gamma 1
    rows = [_row(0, [1, 2], [0.0, 1.0]), _row(0, [1, 3, 2], [0.0, 0.0, 0.0])]
    a, b = step_advantages(rows)
    half = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert a == pytest.approx([half, half])
    assert b == pytest.approx([-half, 0.0, -half])  # C was nobody else's state


def test_the_share_of_turns_in_shared_states() -> None:
    # the worked example: A twice, B twice, C alone -> 4 of 5 keyed turns share a state
    rows = [_row(0, [1, 2], [0.0, 1.0]), _row(0, [1, 3, 2], [0.0, 0.0, 0.0])]
    assert shared_state_share(rows) == pytest.approx(0.8)
    # the same key in another group is another state; unkeyed turns do not count
    rows = [_row(0, [1], [1.0]), _row(1, [1], [0.0]), _row(1, None, [0.0, 0.0])]
    assert shared_state_share(rows) == 0.0
    assert shared_state_share([_row(0, None, [1.0])]) is None


def test_the_share_by_turn_index_and_the_step_group_sizes() -> None:
    # the worked example: turn 1 (A, A) shared; turn 2: B yes, C no; turn 3: B yes
    rows = [_row(0, [1, 2], [0.0, 1.0]), _row(0, [1, 3, 2], [0.0, 0.0, 0.0])]
    assert step_group_sizes(rows) == [[2, 2], [2, 1, 2]]
    assert shared_state_share_by_turn(rows, 8) == {"1": 1.0, "2": 0.5, "3": 1.0}
    assert shared_state_share_by_turn(rows, 2) == {"1": 1.0, "2": 0.6667}  # rounded as logged
    # step-wise parts count by their turn in the episode (`first_turn`), not in the sample
    parts = [
        replace(r, episode=0, first_turn=k)
        for k, r in enumerate((_row(0, [1], [0.0]), _row(0, [2], [1.0])))
    ]
    other = replace(_row(0, [1, 3], [0.0, 0.0]), episode=1)
    assert shared_state_share_by_turn([*parts, other], 8) == {"1": 1.0, "2": 0.0}
    assert step_group_sizes([_row(0, None, [0.0, 1.0])]) == [[0, 0]]
    assert shared_state_share_by_turn([_row(0, None, [0.0])], 8) == {}


def test_no_shared_states_one_episode_and_no_keys_give_nothing() -> None:
    distinct = [_row(0, [1, 2], [0.0, 1.0]), _row(0, [3, 4], [0.0, 0.0])]
    assert all(not v.any() for v in step_advantages(distinct))
    assert not step_advantages([_row(0, [1, 2, 3], [0.0, 0.0, 1.0])])[0].any()
    unkeyed = [_row(0, None, [0.0, 1.0]), _row(0, None, [0.0, 0.0])]
    assert all(not v.any() for v in step_advantages(unkeyed))
    # the same key in two groups is two states: groups are never compared with each other
    apart = [_row(0, [1], [1.0]), _row(1, [1], [0.0])]
    assert all(not v.any() for v in step_advantages(apart))


def test_one_episode_revisiting_a_state_compares_its_own_turns() -> None:
    # a loop: state 7 at turns 1 and 3; the later visit is closer to the reward
    [adv] = step_advantages([_row(0, [7, 8, 7], [0.0, 0.0, 1.0])], turn_gamma=0.5)
    returns = turn_returns(np.array([0.0, 0.0, 1.0]), 0.5)
    assert returns == pytest.approx([0.25, 0.5, 1.0])
    spread = np.std([0.25, 1.0], ddof=1) + 1e-6
    assert adv == pytest.approx([(0.25 - 0.625) / spread, 0.0, (1.0 - 0.625) / spread])


def _reference(
    rows: list[RowTurns], gamma: float, divide: bool, unbiased: bool
) -> list[list[float]]:
    """The formulation written out plainly: returns by a forward sum, groups by a dict."""
    returns = []
    for r in rows:
        k = len(r.rewards)
        returns.append(
            [sum(gamma ** (j - t) * float(r.rewards[j]) for j in range(t, k)) for t in range(k)]
        )
    groups: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for i, r in enumerate(rows):
        for t in range(len(r.rewards)):
            if r.keys is not None:
                groups[(r.group, int(r.keys[t]))].append((i, t))
    out = [[0.0] * len(r.rewards) for r in rows]
    for members in groups.values():
        if len(members) < 2:
            continue
        values = [returns[i][t] for i, t in members]
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / (len(values) - (1 if unbiased else 0))
        for (i, t), v in zip(members, values, strict=True):
            out[i][t] = (v - mean) / (math.sqrt(var) + 1e-6) if divide else v - mean
    return out


@pytest.mark.parametrize("on", ["each_turn", "last_turn"])
def test_a_refusal_mid_episode_is_that_turns_alone_with_gigpo_settings(on: str) -> None:
    """Two episodes of a group from state A to B; episode 1 refuses at B (turn 2: penalty
    0.3 / 3, the next turn acts from B again), episode 2 goes on to D; both fail. Per-turn
    shaping and gamma 0.95 blame turn 2 alone; the last-turn shaping (the earlier studies')
    blames episode 1's third turn, which did nothing wrong, and its first."""
    spec = EnvSpec(invalid_penalty=0.3, shaping_on=on)  # type: ignore[arg-type]
    one = turn_shaped_rewards(0.0, Status.TURN_CAP, [0.0] * 3, [False, True, False], 3, spec, 3)
    two = turn_shaped_rewards(0.0, Status.TURN_CAP, [0.0] * 3, [False] * 3, 3, spec, 3)
    a, b, d = 1, 2, 4
    rows = [_row(0, [a, b, b], one), _row(0, [a, b, d], two)]
    got = step_advantages(rows, turn_gamma=0.95)
    if on == "each_turn":
        assert one == pytest.approx([0.0, -0.1, 0.0])
        # A: returns {-0.095, 0}; B: {-0.1 (the refusal), 0 (the turn after it), 0 (episode 2)}
        half = 0.095 / 2 / (math.sqrt(0.095**2 / 2) + 1e-6)
        sd = math.sqrt(((-0.1 + 0.1 / 3) ** 2 + 2 * (0.1 / 3) ** 2) / 2)
        want = [
            [-half, (-0.1 + 0.1 / 3) / (sd + 1e-6), (0.1 / 3) / (sd + 1e-6)],
            [half, (0.1 / 3) / (sd + 1e-6), 0.0],
        ]
        assert got[0][2] > 0.0  # the turn after the refusal gains
    else:
        assert one == pytest.approx([0.0, 0.0, -0.1])
        returns = [-0.1 * 0.95**2, -0.1 * 0.95, -0.1]
        half = -returns[0] / 2 / (math.sqrt(returns[0] ** 2 / 2) + 1e-6)
        b_group = np.array([returns[1], returns[2], 0.0])
        centred = (b_group - b_group.mean()) / (b_group.std(ddof=1) + 1e-6)
        want = [[-half, centred[0], centred[1]], [half, centred[2], 0.0]]
        assert got[0][2] < 0.0  # blamed for the refusal before it
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(w, abs=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_equal_to_the_reference_on_random_groups(seed: int) -> None:
    rng = random.Random(seed)
    rows = []
    for group in range(rng.randint(1, 4)):
        for _ in range(rng.randint(1, 6)):
            k = rng.randint(1, 7)
            keys = None if rng.random() < 0.1 else [rng.randint(0, 4) for _ in range(k)]
            rewards = [rng.choice([0.0, 0.0, 0.5, 1.0, -0.3]) for _ in range(k)]
            rows.append(_row(group, keys, rewards))
    gamma, divide, unbiased = rng.choice([1.0, 0.9, 0.5]), rng.random() < 0.7, rng.random() < 0.5
    got = step_advantages(rows, turn_gamma=gamma, divide_by_std=divide, unbiased_std=unbiased)
    want = _reference(rows, gamma, divide, unbiased)
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(w, abs=1e-9)


def test_samples_without_per_turn_arrays_put_the_reward_on_the_last_turn() -> None:
    given = _sample([(3, 5), (8, 9)], 0.75, rewards=[0.25, 0.5], keys=[4, 9])
    bare = _sample([(3, 5), (8, 9)], 0.75)
    rows = turns_of([(0, given), (0, bare)])
    assert rows[0].rewards.tolist() == [0.25, 0.5] and rows[0].keys is not None
    assert rows[0].keys.tolist() == [4, 9]
    assert rows[1].rewards.tolist() == [0.0, 0.75] and rows[1].keys is None


def test_the_step_advantage_lands_on_exactly_its_turns_trained_tokens() -> None:
    # two episodes of one group, both acting from state 1 first: only their first turns differ
    win = _sample([(3, 5), (8, 10)], 1.0, rewards=[0.0, 1.0], keys=[1, 2])
    lose = _sample([(3, 6), (9, 10)], 0.0, rewards=[0.0, 0.0], keys=[1, 3])
    rows = [(0, win), (0, lose)]
    width = 12
    mask = torch.zeros(2, width)
    for r, (_, s) in enumerate(rows):
        mask[r, : len(s.tokens) - 1] = torch.from_numpy(s.tokens.loss_mask[1:].astype(np.float32))
    episode = torch.tensor([[1.0], [-1.0]]) * mask
    out = add_step_credit(episode, mask, turns_of(rows), StepCreditConfig(weight=0.5))
    half = 0.5 / (math.sqrt(0.5) + 1e-6)
    # win: turn 1 generated tokens 3-4 train at positions 2-3; turn 2 (8-9) at 7-8
    assert out[0, 2:4] == pytest.approx(torch.tensor([1 + 0.5 * half] * 2))
    assert out[0, 7:9] == pytest.approx(torch.tensor([1.0, 1.0]))
    assert out[1, 2:5] == pytest.approx(torch.tensor([-1 - 0.5 * half] * 3))
    assert out[1, 8:9] == pytest.approx(torch.tensor([-1.0]))
    assert not out[mask == 0].any()  # nothing outside the trained tokens
    spread = token_advantages(turns_of(rows), step_advantages(turns_of(rows)), width)
    assert spread[0, :2].tolist() == [0.0, 0.0] and spread[0, 4:7].tolist() == [0.0] * 3


def test_the_config_section() -> None:
    learn = LearnSettings.model_validate(
        {"advantage": {"estimator": "rloo", "step": {"weight": 0.5, "turn_gamma": 0.9}}}
    )
    assert learn.advantage.step == StepCreditConfig(weight=0.5, turn_gamma=0.9)
    assert LearnSettings().advantage.step is None
    with pytest.raises(ValueError, match="turn_gamma"):
        StepCreditConfig(turn_gamma=1.5)


def test_an_episodes_parts_are_its_turns_in_order() -> None:
    # one episode played twice over: as one sample of three turns, and as three step-wise parts
    # (one turn each, naming episode 0); a second episode shares the first state
    whole = _sample([(3, 5), (8, 10), (13, 14)], 1.0, rewards=[0.0, 0.25, 0.75], keys=[1, 2, 3])
    parts = [
        replace(_sample([(3, 5)], 1.0, rewards=[r], keys=[k]), episode=0)
        for r, k in ((0.0, 1), (0.25, 2), (0.75, 3))
    ]
    other = _sample([(3, 6)], 0.0, rewards=[0.0], keys=[1])
    gamma = 0.9
    one = step_advantages(turns_of([(0, whole), (0, other)]), turn_gamma=gamma)
    split = step_advantages(
        turns_of([(0, p) for p in parts] + [(0, replace(other, episode=1))]), turn_gamma=gamma
    )
    assert [float(a[0]) for a in split[:3]] == pytest.approx(one[0].tolist())
    assert split[3].tolist() == pytest.approx(one[1].tolist())
    # the returns ran across the parts: the first turn's return is 0.25 g + 0.75 g^2
    assert one[0][0] != 0.0


def test_the_credit_log_counts_an_episodes_parts_by_their_turn_in_it() -> None:
    from agentgym_rl.learner.credit_log import trained_samples, turn_means
    from agentgym_rl.wire.types import WireGroup

    parts = [replace(_sample([(3, 5)], 1.0), episode=0) for _ in range(3)]
    other = replace(_sample([(3, 5), (8, 10)], 0.0), episode=1)
    group = WireGroup(1, "maze_1", "maze", [*parts, other])
    rows = [(0, s) for s in group.samples]
    adv = np.zeros((4, 12), np.float32)
    mask = np.zeros((4, 12), np.float32)
    mask[:, 2:4] = 1.0
    mask[3, 7:9] = 1.0
    adv[:3, 2:4] = [[0.5], [1.0], [2.0]]
    logged = trained_samples([group], rows, adv, mask, step=1)
    assert [t.first_turn for t in logged] == [0, 1, 2, 0]
    sums, counts = turn_means(logged, 4)
    assert sums == [1.0, 2.0, 4.0, 0.0] and counts == [4.0, 4.0, 2.0, 0.0]
    # each turn's step group size, from the rows' keys, goes with the sample
    parts = [replace(_sample([(3, 5)], 1.0, keys=[k]), episode=0) for k in (7, 8, 9)]
    other = replace(_sample([(3, 5), (8, 10)], 0.0, keys=[7, 5]), episode=1)
    group = WireGroup(1, "maze_1", "maze", [*parts, other])
    rows = [(0, s) for s in group.samples]
    turns = turns_of(rows)
    assert [r.first_turn for r in turns] == [0, 1, 2, 0]  # as the log counts them
    sizes = step_group_sizes(turns)
    logged = trained_samples([group], rows, adv, mask, step=1, group_sizes=sizes)
    assert [t.turn_shared for t in logged] == [[2], [1], [1], [2, 1]]
