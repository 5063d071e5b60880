"""The chance level tool: the env's own random valid action per turn, counted per category."""

from __future__ import annotations

import pytest

from agentgym_envs import load_env
from agentgym_envs.babyai.env import CHECK, BabyAIEpisode
from agentgym_envs.chance import yardstick_success

# GoToObj test tasks (seeds 1000-1004 of BabyAI-GoToObj-v0 in goto_test.json's numbering)
_ITEMS = [{"item_id": f"babyai_{i}", "category": "GoToObj"} for i in (40010, 40050, 40090)]


@pytest.fixture(scope="module")
def babyai():  # type: ignore[no-untyped-def]
    env = load_env("babyai", observation="compact")
    yield env
    env.close()


def _one_turn_odds(data_idx: int) -> float:
    """Exact chance of success in one turn: the share of available actions that win at once."""
    episode = BabyAIEpisode(compact=True)
    episode.reset(data_idx)
    actions = [a for a in episode.available_actions() if a != CHECK]
    wins = 0
    for action in actions:
        episode.reset(data_idx)
        result = episode.step(action)
        wins += result.done and result.score > 0
    episode.close()
    return wins / len(actions)


def test_one_turn_rate_matches_the_exact_odds(babyai) -> None:  # type: ignore[no-untyped-def]
    exact = sum(_one_turn_odds(int(i["item_id"][7:])) for i in _ITEMS) / len(_ITEMS)
    assert 0 < exact < 1  # the tasks must discriminate: some actions win, some do not
    rates = yardstick_success(babyai, _ITEMS, turn_cap=1, tries=300, seed=1)
    # 900 episodes: the standard error is below 0.017
    assert rates["GoToObj"] == pytest.approx(exact, abs=0.07)
    assert rates["all"] == rates["GoToObj"]


def test_more_turns_win_more_and_seeds_repeat(babyai) -> None:  # type: ignore[no-untyped-def]
    one = yardstick_success(babyai, _ITEMS, turn_cap=1, tries=100, seed=2)
    five = yardstick_success(babyai, _ITEMS, turn_cap=5, tries=100, seed=2)
    assert five["all"] > one["all"] + 0.05
    assert yardstick_success(babyai, _ITEMS, turn_cap=5, tries=100, seed=2) == five


def test_rejects_an_empty_budget(babyai) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="turn_cap and tries"):
        yardstick_success(babyai, _ITEMS, turn_cap=0, tries=1)


def test_searchqa_chance_is_above_zero_and_well_below_one() -> None:
    """SearchQA's random play (a run of the question's words, then an entity of the passages
    shown) finds some answers and misses most: what its demo's base policy is measured against."""
    env = load_env("searchqa", prompt="question", topk="1", end_on_wrong="true")
    items = [{"item_id": f"searchqa_{i}", "category": "1-hop"} for i in (5, 17, 26, 30, 33)]
    try:
        rates = yardstick_success(env, items, turn_cap=3, tries=40, seed=0)
        one_turn = yardstick_success(env, items, turn_cap=1, tries=5, seed=0)
    finally:
        env.close()
    assert 0.02 < rates["1-hop"] < 0.5
    assert one_turn["all"] == 0.0  # the first turn only searches: no answer without passages
