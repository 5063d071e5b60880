"""Native tool calls: goldens for templates of the Qwen2.5, Llama 3.1 and Mistral tool shapes.

Each fixture (`qwen25_tools`, `llama31_tools`, `mistral_tools`, written by `make_golden.py`
from `golden_inputs.py`) holds a 3-turn tool episode: the replies are the raw sampled text of a
call in the family's layout, each result a `tool` message with its `tool_call_id`, and `tools`
is given. The builder's ids are the committed ids, which are transformers' render of the whole
conversation; the loss mask covers exactly the sampled ids. Passing the results as `user`
messages gives other ids, so these goldens catch that mistake.

transformers is loaded as `PreTrainedTokenizerFast` (the fixtures' tokenizer class) rather than
through `AutoTokenizer`, which imports torch.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from agentgym_rl import _core
from agentgym_rl.trajectory import ChatTokenizer, TrajectoryBuilder
from conftest import TEMPLATES, load_golden, replay_case

TOOL_FIXTURES = ["qwen25_tools", "llama31_tools", "mistral_tools"]
FAMILY = {"qwen25_tools": "hermes", "llama31_tools": "llama3", "mistral_tools": "mistral"}


@pytest.fixture(scope="module")
def inputs(golden_lib: ModuleType) -> ModuleType:
    """`golden_inputs.py`, importable once `make_golden.py` has put its folder on sys.path."""
    return importlib.import_module("golden_inputs")


@pytest.fixture(scope="module")
def hf_tokenizers() -> dict[str, Any]:
    transformers = pytest.importorskip("transformers")
    return {
        name: transformers.PreTrainedTokenizerFast.from_pretrained(str(TEMPLATES / name))
        for name in TOOL_FIXTURES
    }


def _source_cases(golden_lib: ModuleType, name: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in golden_lib.TOOL_FIXTURE_CASES[name]}


def _hf_ids(hf: Any, messages: list[dict[str, Any]], tools: Any, prompt: bool = False) -> list[int]:
    out = hf.apply_chat_template(messages, tools=tools, tokenize=True, add_generation_prompt=prompt)
    if hasattr(out, "keys"):
        out = out["input_ids"]
    return [int(i) for i in out]


def _hf_text(hf: Any, messages: list[dict[str, Any]], tools: Any, prompt: bool = False) -> str:
    return str(
        hf.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=prompt)
    )


def _assert_replay(chat: ChatTokenizer, case: dict[str, Any], stop_id: int, label: str) -> None:
    """Builder ids, mask and spans are the golden's; the mask is 1 on the sampled ids only."""
    traj = replay_case(chat, case)
    assert not traj.drift, label
    ids, mask = traj.input_ids.tolist(), traj.loss_mask.tolist()
    assert ids == case["expected_ids"], label
    assert mask == case["expected_mask"], label
    spans = traj.turn_spans.reshape(-1, 2).tolist()
    assert spans == case["turn_spans"], label
    replies = [m["content"] for m in case["messages"] if m["role"] == "assistant"]
    assert len(spans) == len(replies) == len(case["engine_ids"])
    sampled = np.zeros(len(ids), np.uint8)
    for (s, e), engine, reply in zip(spans, case["engine_ids"], replies, strict=True):
        # The sampled ids: the raw reply text, then the stop token, verbatim.
        assert engine == [*chat.encode(reply).tolist(), stop_id], label
        assert ids[s:e] == engine, label
        sampled[s:e] = 1
    assert mask == sampled.tolist(), label
    assert sum(mask) == sum(len(e) for e in case["engine_ids"]), label


@pytest.mark.parametrize("name", TOOL_FIXTURES)
def test_tool_golden_replays(name: str) -> None:
    chat, golden = load_golden(name)
    assert golden["pieces"] is None and golden["stop_id"] == chat.eos_token_id
    episode = next(c for c in golden["cases"] if c["name"] == "tool_episode")
    roles = [m["role"] for m in episode["messages"]]
    assert roles == ["system", "user", *["assistant", "tool"] * 2, "assistant"]
    assert all(m.get("tool_call_id") for m in episode["messages"] if m["role"] == "tool")
    assert [t["function"]["name"] for t in episode["tools"]] == ["search", "answer"]
    for case in golden["cases"]:
        _assert_replay(chat, case, golden["stop_id"], f"{name}/{case['name']}")
    assert chat.drift_count == 0
    assert chat.checked_count == len(golden["cases"])


@pytest.mark.parametrize("name", TOOL_FIXTURES)
def test_tool_goldens_are_transformers_full_render(
    name: str, golden_lib: ModuleType, hf_tokenizers: dict[str, Any]
) -> None:
    """The committed ids are what transformers gives now: recomputed live from the inputs, and
    the full render's ids (`tools=` given) up to the last reply's stop token, the rest being
    only the template's whitespace after it."""
    hf = hf_tokenizers[name]
    _, golden = load_golden(name)
    template = (TEMPLATES / name / "chat_template.jinja").read_text(encoding="utf-8")
    assert template == golden_lib.TOOL_TEMPLATES[name]
    source = _source_cases(golden_lib, name)
    assert sorted(source) == sorted(c["name"] for c in golden["cases"])
    for case in golden["cases"]:
        label = f"{name}/{case['name']}"
        assert golden_lib.expected_for(hf, source[case["name"]], golden["stop_id"]) == case, label
        # The same expectations from the rendered text, encoded piecewise around the replies.
        live = golden_lib.expected_from_text(hf, source[case["name"]], golden["stop_id"], "")
        assert live == case, label
        full = _hf_ids(hf, case["messages"], case["tools"])
        expected = case["expected_ids"]
        assert full[: len(expected)] == expected, label
        assert hf.decode(full[len(expected) :]).strip() == "", label
        assert expected[-1] == golden["stop_id"] == full[len(expected) - 1]


@pytest.mark.parametrize("name", TOOL_FIXTURES)
def test_render_with_tools_matches_transformers(
    name: str, golden_lib: ModuleType, inputs: ModuleType, hf_tokenizers: dict[str, Any]
) -> None:
    """`ChatTokenizer.render(messages, tools=...)` is transformers' render: the episode, its
    prompt, the same with `user` observations and with structured `tool_calls`, and no tools."""
    hf = hf_tokenizers[name]
    chat, _ = load_golden(name)
    for case in golden_lib.TOOL_FIXTURE_CASES[name]:
        messages = [golden_lib.clean(m) for m in case["messages"]]
        first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
        variants = [
            (messages, False),
            (messages[:first], True),
            (inputs.as_user_observations(case)["messages"], False),
            (inputs.as_structured_calls(case, FAMILY[name]), False),
            (inputs.as_structured_calls(case, FAMILY[name])[: first + 2], True),
        ]
        for tools in [case["tools"], None]:
            for msgs, prompt in variants:
                text = _hf_text(hf, msgs, tools, prompt)
                ours = chat.render(msgs, tools=tools, add_generation_prompt=prompt)
                assert ours == text, f"{name}/{case['name']} tools={tools is not None}"
                # The schemas are rendered when (and only when) tools are given.
                described = "at most 5 items & their prices (<= 100)" in text
                assert described == (tools is not None)


@pytest.mark.parametrize("name", TOOL_FIXTURES)
def test_tool_results_as_user_messages_miss_the_golden(
    name: str, golden_lib: ModuleType, inputs: ModuleType, hf_tokenizers: dict[str, Any]
) -> None:
    """Tool results passed with role `user`: another render, other ids than the golden's (the
    sampled ids unchanged), which is what transformers gives for that conversation."""
    hf = hf_tokenizers[name]
    chat, golden = load_golden(name)
    source = _source_cases(golden_lib, name)
    for case in golden["cases"]:
        label = f"{name}/{case['name']}"
        as_user = inputs.as_user_observations(source[case["name"]])
        user_messages = [golden_lib.clean(m) for m in as_user["messages"]]
        tools = case["tools"]
        assert chat.render(user_messages, tools=tools) != chat.render(case["messages"], tools=tools)
        assert _hf_text(hf, user_messages, tools) != _hf_text(hf, case["messages"], tools)
        traj = replay_case(chat, {**case, "messages": user_messages})
        ids = traj.input_ids.tolist()
        assert not traj.drift, label  # a consistent trajectory, of another conversation
        assert ids != case["expected_ids"], label
        sampled = [ids[s:e] for s, e in traj.turn_spans.reshape(-1, 2).tolist()]
        assert sampled == case["engine_ids"], label
        live = golden_lib.expected_for(hf, as_user, golden["stop_id"])
        assert ids == live["expected_ids"] != case["expected_ids"], label


def test_mistral_tools_before_the_last_user_message_are_not_append_only(
    golden_lib: ModuleType, inputs: ModuleType
) -> None:
    """Why `mistral_tools` writes its tools with the first user message: Mistral v3's placement
    (before the last one) moves them when a user observation follows, and the builder has no
    observation delta; with tool observations alone the last user message stays the first."""
    tokenizer = TEMPLATES / "mistral_tools" / "tokenizer.json"
    special = {"bos_token": "<s>", "eos_token": "</s>"}
    case = next(c for c in golden_lib.TOOL_FIXTURE_CASES["mistral_tools"])
    prompt = [golden_lib.clean(m) for m in case["messages"][:2]]
    reply = case["messages"][2]["content"]
    user = {"role": "user", "content": "Search again."}
    tool = golden_lib.clean(case["messages"][3])
    for template, user_ok in [
        (inputs.MISTRAL_LAST_USER_TOOLS_TEMPLATE, False),
        (inputs.MISTRAL_TOOLS_TEMPLATE, True),
    ]:
        chat = ChatTokenizer.from_parts(Path(tokenizer), template, special)
        for observation, ok in [(tool, True), (user, user_ok)]:
            b = TrajectoryBuilder(chat, prompt, tools=case["tools"])
            ids = [*chat.encode(reply).tolist(), chat.eos_token_id]
            assert b.add_generated(ids, [0.0] * len(ids), 0)
            if ok:
                assert b.add_observation(observation)
            else:
                with pytest.raises(_core.BaseNotPrefixError):
                    b.add_observation(observation)
