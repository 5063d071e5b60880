"""Builder behaviour through the `_core` binding: arrays, truncation, drift, errors."""

from __future__ import annotations

import numpy as np
import pytest

from agentgym_rl import _core
from agentgym_rl.trajectory import ChatTokenizer, TrajectoryBuilder
from conftest import TEMPLATES, load_golden

PROMPT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Open the door."}]


@pytest.fixture
def chat() -> ChatTokenizer:
    return ChatTokenizer.from_dir(TEMPLATES / "chatml")


def _turn(chat: ChatTokenizer, text: str, stop: bool = True) -> list[int]:
    ids = chat.encode(text).tolist()
    return [*ids, chat.eos_token_id] if stop else ids


def test_arrays_dtypes_lengths_and_values(chat: ChatTokenizer) -> None:
    b = TrajectoryBuilder(chat, PROMPT, prompt_version=7)
    prompt_len = len(b)
    assert prompt_len == len(chat.apply_chat_template(PROMPT, add_generation_prompt=True))
    ids = _turn(chat, "open door")
    assert b.add_generated(ids, [-0.5] * len(ids), [8] * 2 + [9] * (len(ids) - 2))
    assert b.add_observation({"role": "user", "content": "The door is open."})
    ids2 = _turn(chat, "go north")
    assert b.add_generated(ids2, [-1.0] * len(ids2), 9)
    t = b.finish()
    n = len(t)
    assert (t.input_ids.dtype, t.loss_mask.dtype, t.logprobs.dtype, t.versions.dtype) == (
        np.uint32,
        np.uint8,
        np.float32,
        np.uint32,
    )
    assert t.turn_spans.dtype == np.uint32
    assert len(t.input_ids) == len(t.loss_mask) == len(t.logprobs) == len(t.versions) == n
    assert t.input_ids.flags.owndata or t.input_ids.base is not None
    s0, e0, s1, e1 = t.turn_spans.tolist()
    assert (s0, e0 - s0, e1 - s1, e1) == (prompt_len, len(ids), len(ids2), n)
    assert t.loss_mask.sum() == len(ids) + len(ids2)
    assert t.input_ids[s1:e1].tolist() == ids2
    assert np.all(t.logprobs[t.loss_mask == 0] == 0.0)
    assert t.versions[:prompt_len].tolist() == [7] * prompt_len
    assert t.versions[s0 : s0 + 3].tolist() == [8, 8, 9]
    assert (t.turns, t.prompt_len, t.truncated, t.drift) == (2, prompt_len, False, False)
    with pytest.raises(_core.TrajectoryInputError):
        b.finish()


def test_truncation_at_turn_boundary(chat: ChatTokenizer) -> None:
    prompt = chat.prompt(PROMPT)
    ids = _turn(chat, "open the door slowly and look around")
    b = TrajectoryBuilder(chat, prompt, max_len=len(prompt) + len(ids) + 2)
    assert b.remaining == len(ids) + 2
    assert b.add_generated(ids, [0.0] * len(ids), 1)
    size = len(b)
    assert not b.add_observation({"role": "user", "content": "A long description of the room."})
    assert b.truncated and len(b) == size
    assert not b.add_observation({"role": "user", "content": "again"})
    t = b.finish()
    assert t.truncated and not t.drift and len(t) == size

    b = TrajectoryBuilder(chat, prompt, max_len=len(prompt) + 3)
    assert not b.add_generated(ids, [0.0] * len(ids), 1)
    t = b.finish()
    assert t.truncated and len(t) == len(prompt) and t.turns == 0


def test_max_tokens_turn_gets_whole_closing(chat: ChatTokenizer) -> None:
    b = TrajectoryBuilder(chat, PROMPT)
    ids = _turn(chat, "one two three", stop=False)
    assert b.add_generated(ids, [0.0] * len(ids), 0)
    assert b.add_observation([{"role": "tool", "content": "a"}, {"role": "tool", "content": "b"}])
    text = chat.decode(b.finish().input_ids.tolist())
    assert text.endswith(
        "one two three<|im_end|>\n<|im_start|>user\n<tool_response>\na\n</tool_response>\n"
        "<tool_response>\nb\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_llama2_reply_is_closed_once_and_only_its_gap_is_forgiven() -> None:
    """Llama 2 renders a reply as `' ' + content.strip() + ' ' + '</s>'`: the glue after the
    sampled `</s>` is nothing, and the space before it, never sampled, is not drift."""
    chat = ChatTokenizer.from_dir(TEMPLATES / "llama2")
    maze = [{"role": "user", "content": "You are in a maze."}]

    def build(reply: str) -> TrajectoryBuilder:
        b = TrajectoryBuilder(chat, maze)
        ids = _turn(chat, reply)
        assert b.add_generated(ids, [0.0] * len(ids), 0)
        assert b.add_observation({"role": "user", "content": "A wall."})
        return b

    b = build(" Action: turn left")
    assert chat.decode(b.ids.tolist()).endswith(
        "[/INST] Action: turn left</s><s>[INST] A wall. [/INST]"
    )
    assert b.check_drift().clean
    assert not b.finish().drift
    # `content.strip()` drops the reply's trailing spaces: a real rewrite, still drift.
    b = build(" Action: turn left  ")
    report = b.check_drift()
    assert not report.clean
    assert "left  </s>" in report.actual and "left </s>" in report.expected
    assert b.finish().drift
    assert (chat.checked_count, chat.drift_count) == (2, 1)


def test_drift_flag_counter_and_strict_error() -> None:
    chat, golden = load_golden("qwen3_think")
    messages = golden["cases"][0]["messages"]
    engine = golden["cases"][0]["engine_ids"]

    def build(strict: bool) -> TrajectoryBuilder:
        b = TrajectoryBuilder(chat, messages[:1], strict=strict)
        assert b.add_generated(engine[0], [0.0] * len(engine[0]), 0)
        assert b.add_observation(messages[2])
        assert b.add_generated(engine[1], [0.0] * len(engine[1]), 0)
        return b

    b = build(strict=False)
    report = b.check_drift()
    assert not report.clean and report.offset is not None
    assert "<think>" in report.actual and "<think>" not in report.expected
    assert b.finish().drift
    with pytest.raises(_core.DriftError):
        build(strict=True).finish()
    assert chat.drift_count == 2
    assert issubclass(_core.DriftError, _core.AgentGymError)


def test_each_error_variant_has_its_exception(chat: ChatTokenizer, tmp_path) -> None:
    tok = TEMPLATES / "chatml" / "tokenizer.json"
    names = [
        "TokenizerLoadError",
        "ChatConfigError",
        "TemplateSyntaxError",
        "TemplateRenderError",
        "TokenizeError",
        "PlaceholderNotFoundError",
        "BaseNotPrefixError",
        "DriftError",
        "TrajectoryInputError",
    ]
    for name in names:
        assert issubclass(getattr(_core, name), _core.TrajectoryError)
    assert issubclass(_core.TrajectoryError, _core.AgentGymError)
    with pytest.raises(_core.TokenizerLoadError):
        ChatTokenizer.from_parts(tmp_path / "missing.json", "x")
    (tmp_path / "tokenizer.json").write_bytes(tok.read_bytes())
    with pytest.raises(_core.ChatConfigError):
        ChatTokenizer.from_dir(tmp_path)
    with pytest.raises(_core.TemplateSyntaxError):
        ChatTokenizer.from_parts(tok, "{% if %}")
    with pytest.raises(_core.TemplateRenderError, match="no system"):
        ChatTokenizer.from_parts(tok, "{{ raise_exception('no system') }}").render([])
    with pytest.raises(_core.PlaceholderNotFoundError):
        ChatTokenizer.from_parts(
            tok, "{% for m in messages %}{{ m.content|lower }}{% endfor %}"
        ).prompt(PROMPT)
    rewriting = "{% for m in messages %}{% if loop.last %}>{% endif %}{{ m.content }}{% endfor %}"
    b = TrajectoryBuilder(ChatTokenizer.from_parts(tok, rewriting), PROMPT, stop_ids=[0])
    assert b.add_generated([5, 0], [0.0, 0.0], 0)
    with pytest.raises(_core.BaseNotPrefixError):
        b.add_observation({"role": "user", "content": "x"})
    b = TrajectoryBuilder(chat, PROMPT)
    with pytest.raises(_core.TrajectoryInputError):
        b.add_generated([1, 2], [0.0], 0)
    with pytest.raises(_core.TrajectoryInputError):
        b.add_observation({"role": "user", "content": "observation before any generation"})
    with pytest.raises(_core.TrajectoryInputError):
        chat.inner.render("not json")
    # TokenizeError (the tokenizer itself failing) has no portable trigger: unknown ids are
    # skipped by decode, and encode accepts any str.
