"""The chance level tool: a random available action per turn, counted per category."""

from __future__ import annotations

import pytest

from agentgym_envs.babyai.chance import chance_success
from agentgym_envs.babyai.env import CHECK, BabyAIEpisode

# GoToObj test tasks (seeds 1000-1004 of BabyAI-GoToObj-v0 in goto_test.json's numbering)
_ITEMS = [{"item_id": f"babyai_{i}", "category": "GoToObj"} for i in (40010, 40050, 40090)]


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


def test_one_turn_rate_matches_the_exact_odds() -> None:
    exact = sum(_one_turn_odds(int(i["item_id"][7:])) for i in _ITEMS) / len(_ITEMS)
    assert 0 < exact < 1  # the tasks must discriminate: some actions win, some do not
    rates = chance_success(_ITEMS, max_turns=1, tries=300, seed=1)
    # 900 episodes: the standard error is below 0.017
    assert rates["GoToObj"] == pytest.approx(exact, abs=0.07)
    assert rates["all"] == rates["GoToObj"]


def test_more_turns_win_more_and_seeds_repeat() -> None:
    one = chance_success(_ITEMS, max_turns=1, tries=100, seed=2)
    five = chance_success(_ITEMS, max_turns=5, tries=100, seed=2)
    assert five["all"] > one["all"] + 0.05
    assert chance_success(_ITEMS, max_turns=5, tries=100, seed=2) == five


def test_rejects_an_empty_budget() -> None:
    with pytest.raises(ValueError, match="max_turns and tries"):
        chance_success(_ITEMS, max_turns=0, tries=1)
