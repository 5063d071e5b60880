"""Action parsing per env format; invalid turns get feedback instead of an env step."""

from __future__ import annotations

import pytest

from agentgym_rl.config import ActionFormat
from agentgym_rl.episode.actions import parse_action, restore_stop_string, stop_strings


@pytest.mark.parametrize(
    "text, action",
    [
        ("Thought: go left.\nAction: turn left", "turn left"),
        ("Action: turn left\nThought: no wait\nAction: go to red ball 1", "go to red ball 1"),
        ("thought: x\naction:   move forward.  ", "move forward"),
        ("Action: `pick up red key 1`", "pick up red key 1"),
        ('Thought: "Action: fake" inline\nAction: "toggle"', "toggle"),
        ("**Action:** craft 1 stick", "craft 1 stick"),
        ("- Action: inventory", "inventory"),
    ],
)
def test_react(text: str, action: str | None) -> None:
    parsed = parse_action(text, ActionFormat.REACT)
    assert parsed.action == action
    if action is None:
        assert not parsed.valid and parsed.feedback and "Action:" in parsed.feedback


@pytest.mark.parametrize("text", ["Thought: I am thinking", "", "Action:   \n"])
def test_react_invalid_has_feedback(text: str) -> None:
    parsed = parse_action(text, ActionFormat.REACT)
    assert parsed.action is None
    assert parsed.feedback is not None and parsed.feedback.startswith("Invalid action format")


@pytest.mark.parametrize(
    "text, action",
    [
        (
            "<think>hm</think><search> capital of  France </search>",
            "<search>capital of France</search>",
        ),
        ("<answer>Paris</answer> and <search>x</search>", "<answer>Paris</answer>"),
        ("<ANSWER>\nParis\n</ANSWER>", "<answer>Paris</answer>"),
        ("<search></search>", None),
        ("<search>unclosed", None),
        ("just text", None),
    ],
)
def test_tags(text: str, action: str | None) -> None:
    assert parse_action(text, ActionFormat.TAGS).action == action


@pytest.mark.parametrize(
    "text, action",
    [
        (
            "Let's click it. In summary, the next action I will perform is ```click [1234]```",
            "click [1234]",
        ),
        ("```type [12] [hello world] [1]```", "type [12] [hello world] [1]"),
        ("```scroll [down]```\nthen\n```stop [42 dollars]```", "stop [42 dollars]"),
        ("```click [abc]```", None),
        ("I think\ngo_back", "go_back"),
        ("```goto [http://x.org/a]```", "goto [http://x.org/a]"),
        ("```stop```", "stop"),
        ("click here please", None),
        ("Thought: the price is listed.\nAction: stop [$12.50]", "stop [$12.50]"),
        ("Action: `click [7]`", "click [7]"),
        ("Action: click the button", None),
    ],
)
def test_webarena(text: str, action: str | None) -> None:
    parsed = parse_action(text, ActionFormat.WEBARENA)
    assert parsed.action == action
    assert parsed.valid == (action is not None)


@pytest.mark.parametrize(
    ("text", "restored"),
    [
        (
            "I will look it up. <search>capital of Veltro",
            "I will look it up. <search>capital of Veltro</search>",
        ),
        ("<search>a</search> then <answer>Brenn", "<search>a</search> then <answer>Brenn</answer>"),
        ("<answer>Brenn</answer>", "<answer>Brenn</answer>"),
        ("no tag at all", "no tag at all"),
    ],
)
def test_restore_stop_string(text: str, restored: str) -> None:
    """An OpenAI-compatible API ends the reply before the stop string: it is put back."""
    assert restore_stop_string(text, ActionFormat.TAGS) == restored
    assert parse_action(restored, ActionFormat.TAGS).valid == ("<" in text)
    assert restore_stop_string(text, ActionFormat.REACT) == text


def test_stop_strings_per_format() -> None:
    assert stop_strings(ActionFormat.TAGS) == ("</search>", "</answer>")
    assert stop_strings(ActionFormat.REACT) == () == stop_strings(ActionFormat.WEBARENA)
