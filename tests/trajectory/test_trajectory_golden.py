"""The builder against transformers' apply_chat_template: committed golden fixtures for the
ChatML, Llama-3, Llama-2 (trimming and not), Mistral and newline-before-eos style templates, their expectations
recomputed live, and a live comparison with Mistral's tekken tokenizer."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from agentgym_rl.trajectory import ChatTokenizer
from conftest import TEMPLATES, load_golden, replay_case

# Fixtures whose expectations come from transformers' rendered text (`expected_from_text`).
TEXT_FIXTURES = ["llama2", "llama2_raw", "newline_eos", "mistral"]
# Built text and transformers' render around the first reply's end: the template's text before
# `</s>` is never sampled, and the glue is what the template puts after `</s>`, once.
SNIPPETS = {
    "llama2": ("turn left</s><s>[INST] You turn left.", "turn left </s><s>[INST] You turn left."),
    "llama2_raw": (
        "turn left</s><s>[INST] You turn left.",
        "turn left </s><s>[INST] You turn left.",
    ),
    "newline_eos": ("turn left</s>\n\n### User:\nYou", "turn left\n</s>\n\n### User:\nYou"),
    "mistral": ("turn left</s>[INST]You turn left.", "turn left</s>[INST]You turn left."),
}


def _assert_matches(traj: Any, expected: dict[str, Any], label: str) -> None:
    assert not traj.drift, label
    np.testing.assert_array_equal(
        traj.input_ids, np.array(expected["expected_ids"], np.uint32), label
    )
    np.testing.assert_array_equal(
        traj.loss_mask, np.array(expected["expected_mask"], np.uint8), label
    )
    spans = [x for span in expected["turn_spans"] for x in span]
    np.testing.assert_array_equal(traj.turn_spans, np.array(spans, np.uint32), label)


@pytest.mark.parametrize("name", ["chatml", "llama3", *TEXT_FIXTURES])
def test_golden_fixtures(name: str) -> None:
    chat, golden = load_golden(name)
    for case in golden["cases"]:
        _assert_matches(replay_case(chat, case), case, f"{name}/{case['name']}")
    assert chat.drift_count == 0
    assert chat.checked_count == len(golden["cases"])


def _source_cases(golden_lib: ModuleType) -> dict[str, dict[str, Any]]:
    """The fixture conversations by name, with their `_stop` marks (golden.json drops them)."""
    cases = [*golden_lib.CASES, golden_lib.TOOLS_CASE, *golden_lib.PRE_EOS_CASES]
    return {c["name"]: c for c in cases}


@pytest.mark.parametrize("name", TEXT_FIXTURES)
def test_text_before_end_token_fixtures_are_transformers(name: str, golden_lib: ModuleType) -> None:
    """The committed expectations are what transformers gives now, and so is our render: Llama 2
    writes `' ' + content.strip() + ' ' + eos_token`, the trajectory has `...left</s><s>[INST]`."""
    transformers = pytest.importorskip("transformers")
    chat, golden = load_golden(name)
    hf = transformers.AutoTokenizer.from_pretrained(str(TEMPLATES / name))
    source = _source_cases(golden_lib)
    for case in golden["cases"]:
        live = golden_lib.expected_from_text(
            hf, source[case["name"]], golden["stop_id"], golden["pre_eos"]
        )
        assert live == case, f"{name}/{case['name']}"
        text = hf.apply_chat_template(case["messages"], tools=case["tools"], tokenize=False)
        assert chat.render(case["messages"], tools=case["tools"]) == text
    # The issue-18 case: built (replies verbatim, then what follows `</s>`) against the render.
    turns = next(c for c in golden["cases"] if c["name"] == "actions_then_observations")
    built = chat.decode(replay_case(chat, turns).input_ids.tolist())
    rendered = hf.apply_chat_template(turns["messages"], tokenize=False)
    built_part, rendered_part = SNIPPETS[name]
    assert built_part in built and rendered_part in rendered


@pytest.mark.parametrize("name", ["chatml", "llama3"])
def test_text_expectations_agree_with_id_expectations(name: str, golden_lib: ModuleType) -> None:
    """With nothing before the end token, `expected_from_text` gives the committed ids that
    `expected_for` sliced out of `apply_chat_template(tokenize=True)`."""
    transformers = pytest.importorskip("transformers")
    _, golden = load_golden(name)
    hf = transformers.AutoTokenizer.from_pretrained(str(TEMPLATES / name))
    source = _source_cases(golden_lib)
    for case in golden["cases"]:
        live = golden_lib.expected_from_text(hf, source[case["name"]], golden["stop_id"], "")
        assert live == case, f"{name}/{case['name']}"


def test_history_rewriting_template_is_drift() -> None:
    chat, golden = load_golden("qwen3_think")
    case = golden["cases"][0]
    traj = replay_case(chat, case)
    assert traj.drift
    assert chat.drift_count == 1
    # Generated ids are still verbatim: the drift is reported, never patched.
    spans = traj.turn_spans.reshape(-1, 2).tolist()
    for (s, e), ids in zip(spans, case["engine_ids"], strict=True):
        assert traj.input_ids[s:e].tolist() == ids


@pytest.fixture(scope="module")
def tekken(tekken_dir: Path) -> tuple[ChatTokenizer, Any]:
    transformers = pytest.importorskip("transformers")
    return ChatTokenizer.from_dir(tekken_dir), transformers.AutoTokenizer.from_pretrained(
        str(tekken_dir)
    )


def test_tekken_live_against_transformers(
    tekken: tuple[ChatTokenizer, Any], golden_lib: ModuleType
) -> None:
    chat, hf = tekken
    stop_id = hf.convert_tokens_to_ids("</s>")
    assert chat.eos_token_id == stop_id
    for case in [*golden_lib.CASES, golden_lib.TOOLS_CASE]:
        expected = golden_lib.expected_for(hf, case, stop_id)
        _assert_matches(replay_case(chat, expected), expected, f"tekken/{case['name']}")
        clean = expected["messages"]
        text = hf.apply_chat_template(clean, tools=case.get("tools"), tokenize=False)
        assert chat.render(clean, tools=case.get("tools")) == text


def test_tekken_encode_matches_transformers(
    tekken: tuple[ChatTokenizer, Any], golden_lib: ModuleType
) -> None:
    chat, hf = tekken
    for text in [golden_lib.LONG_OBSERVATION, "«café» 東京 🍵\n\n  x[INST]y[/INST]</s>", ""]:
        assert chat.encode(text).tolist() == hf.encode(text, add_special_tokens=False)
