"""SearchQA's random actions (what init-model's transcripts play): entity names found in
passages, queries made of the question's words, answers naming an entity of the passages
shown, and a chance level that is above zero but far from solving the task."""

from __future__ import annotations

import random

import pytest

from agentgym_envs.searchqa.entities import EntityIndex, random_search
from agentgym_envs.searchqa.env import SearchQAEnvironment
from agentgym_envs.searchqa.scoring import exact_match, parse_action


def test_mentions_are_whole_names_longest_first_in_order() -> None:
    index = EntityIndex(['"Keli"', '"Fresco of Stehaes"', '"Gril Noulom"', '"Gril"', '"Of"'])
    text = "Gril Noulom made the Fresco of Stehaes in Keli; Gril and Kelisa did not. Keli again."
    assert index.mentions(text) == ["Gril Noulom", "Fresco of Stehaes", "Keli", "Gril"]
    assert index.mentions("nothing here") == []


def test_random_search_is_a_run_of_the_questions_words() -> None:
    rng = random.Random(0)
    question = "In which city was Briazand Thigaer born?"
    words = question.rstrip("?").split()
    for _ in range(50):
        query = parse_action(random_search(question, rng))
        assert query is not None and query[0] == "search"
        picked = query[1].split()
        assert 1 <= len(picked) <= 6
        assert " ".join(picked) in " ".join(words)  # a run of the question's words


@pytest.fixture(scope="module")
def env() -> SearchQAEnvironment:
    return SearchQAEnvironment(topk="2", end_on_wrong="true", prompt="question")


def test_random_answers_name_entities_of_the_passages_shown(env: SearchQAEnvironment) -> None:
    rng = random.Random(1)
    episode = env.new_episode()
    answers = 0
    for data_idx in range(40):
        episode.reset(data_idx)
        first = episode.random_action(rng)
        assert first is not None and first.startswith("<search>")  # nothing shown yet
        shown = episode.step(first).observation
        action = episode.random_action(rng)
        assert action is not None
        tag, content = parse_action(action) or ("", "")
        if tag == "answer":
            answers += 1
            assert content in env.entity_index.mentions(shown)
    assert 10 < answers < 30  # an answer about half the time once passages were shown


def test_chance_is_above_zero_and_far_from_solved(env: SearchQAEnvironment) -> None:
    """Random play on 200 1-hop questions: some answer right (GRPO gets signal), most do not;
    the right answer is always among the entities of a search for the whole question."""
    rng = random.Random(0)
    one_hop = [i for i, q in enumerate(env.questions) if q.category == "1-hop"][:200]
    episode = env.new_episode()
    solved = 0
    for data_idx in one_hop:
        episode.reset(data_idx)
        for _ in range(3):
            action = episode.random_action(rng)
            assert action is not None
            result = episode.step(action)
            if result.done:
                solved += result.score > 0
                break
        qa = env.questions[data_idx]
        seen = env.entities_in(env.search(qa.question))
        assert any(exact_match(e, qa.golden_answers) for e in seen), qa.question
    assert 0.02 < solved / len(one_hop) < 0.25
