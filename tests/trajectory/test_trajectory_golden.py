"""The builder against transformers' apply_chat_template: committed golden fixtures for the
ChatML and Llama-3 style templates, and a live comparison with Mistral's tekken tokenizer."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from agentgym_rl.trajectory import ChatTokenizer
from conftest import load_golden, replay_case


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


@pytest.mark.parametrize("name", ["chatml", "llama3"])
def test_golden_fixtures(name: str) -> None:
    chat, golden = load_golden(name)
    for case in golden["cases"]:
        _assert_matches(replay_case(chat, case), case, f"{name}/{case['name']}")
    assert chat.drift_count == 0
    assert chat.checked_count == len(golden["cases"])


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
