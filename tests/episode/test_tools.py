"""Native tool calls: reading calls per template family, checking them against an env's tools,
and whole episodes in tool mode against a real env server (token-in/token-out, no drift)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from tests.episode.test_agent import plan, run, scripted

from agentgym_rl.config import ActionFormat
from agentgym_rl.episode.tools import (
    ToolCall,
    ToolCallError,
    ToolFamily,
    ToolReader,
    ToolSet,
    detect_family,
    parse_tool_calls,
    tool_reader,
    write_call,
)
from agentgym_rl.episode.types import EnvSpec
from agentgym_rl.policy_creation import CHATML_TEMPLATE
from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.trajectory import ChatTokenizer
from scripted_engine import CHATML, ScriptedEngine, check_sample_arrays

WEB_TOOLS = [
    {
        "schema": {
            "type": "function",
            "function": {
                "name": "click",
                "description": "Click an element.",
                "parameters": {
                    "type": "object",
                    "properties": {"element_id": {"type": "integer"}},
                    "required": ["element_id"],
                },
            },
        },
        "action": "click [{element_id}]",
        "defaults": {},
    },
    {
        "schema": {
            "type": "function",
            "function": {
                "name": "type",
                "description": "Type text into an element.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "element_id": {"type": "integer"},
                        "text": {"type": "string"},
                        "press_enter": {"type": "boolean"},
                    },
                    "required": ["element_id", "text"],
                },
            },
        },
        "action": "type [{element_id}] [{text}] [{press_enter}]",
        "defaults": {"press_enter": True},
    },
    {
        "schema": {
            "type": "function",
            "function": {
                "name": "scroll",
                "description": "Scroll the page.",
                "parameters": {
                    "type": "object",
                    "properties": {"direction": {"type": "string", "enum": ["up", "down"]}},
                    "required": ["direction"],
                },
            },
        },
        "action": "scroll [{direction}]",
        "defaults": {},
    },
]


@pytest.fixture(scope="module")
def web() -> ToolSet:
    return ToolSet.from_wire(WEB_TOOLS)


CALL = ToolCall("click", {"element_id": 12})


@pytest.mark.parametrize(
    ("family", "text"),
    [
        (
            ToolFamily.HERMES,
            '<tool_call>\n{"name": "click", "arguments": {"element_id": 12}}\n</tool_call>',
        ),
        (
            ToolFamily.HERMES,
            'I will click.\n<tool_call>{"name": "click", "arguments": {"element_id": 12}}',
        ),
        (ToolFamily.LLAMA3, '{"name": "click", "parameters": {"element_id": 12}}'),
        (ToolFamily.LLAMA3, '<|python_tag|>{"name": "click", "arguments": {"element_id": 12}}'),
        (ToolFamily.MISTRAL, '[TOOL_CALLS][{"name": "click", "arguments": {"element_id": 12}}]'),
        (ToolFamily.MISTRAL, '[TOOL_CALLS]click[ARGS]{"element_id": 12}'),
        (
            ToolFamily.HERMES,
            '<tool_call>{"name": "click", "arguments": "{\\"element_id\\": 12}"}</tool_call>',
        ),
    ],
)
def test_each_family_reads_a_well_formed_call(family: ToolFamily, text: str) -> None:
    parsed = parse_tool_calls(text, family)
    assert parsed.error is None and parsed.found
    assert [(c.name, c.arguments) for c in parsed.calls] == [("click", {"element_id": 12})]


@pytest.mark.parametrize("family", list(ToolFamily))
def test_written_calls_read_back(family: ToolFamily) -> None:
    call = ToolCall("type", {"element_id": 3, "text": "«café» [x]", "press_enter": False})
    [back] = parse_tool_calls(write_call(call, family), family).calls
    assert (back.name, back.arguments) == (call.name, call.arguments)


@pytest.mark.parametrize(
    ("family", "text", "error"),
    [
        (ToolFamily.HERMES, "<tool_call>{name: click}</tool_call>", "not valid JSON"),
        (ToolFamily.HERMES, '<tool_call>["click"]</tool_call>', 'string "name"'),
        (ToolFamily.HERMES, '<tool_call>{"arguments": {}}</tool_call>', 'string "name"'),
        (
            ToolFamily.HERMES,
            '<tool_call>{"name": "click", "arguments": "{oops"}</tool_call>',
            "not valid JSON",
        ),
        (ToolFamily.LLAMA3, '{"name": "click", "parameters": {"element_id": 1', "not valid JSON"),
        (ToolFamily.MISTRAL, "[TOOL_CALLS][{'name': 'click'}]", "not valid JSON"),
    ],
)
def test_malformed_calls_say_what_is_wrong(family: ToolFamily, text: str, error: str) -> None:
    parsed = parse_tool_calls(text, family)
    assert parsed.found and not parsed.calls and error in (parsed.error or "")


def test_a_reply_without_a_call_is_not_found() -> None:
    for family in ToolFamily:
        assert not parse_tool_calls("Thought: click the button.\nAction: click [12]", family).found


def test_two_calls_in_one_reply_execute_one_and_refuse_the_rest(web: ToolSet) -> None:
    text = (
        write_call(CALL, ToolFamily.HERMES)
        + "\n"
        + write_call(ToolCall("scroll", {"direction": "down"}), ToolFamily.HERMES)
    )
    reading = ToolReader(web, ToolFamily.HERMES).read(text, turn=4)
    first, second = reading.steps
    assert (first.action, first.id) == ("click [12]", "call_4_0")
    assert second.action is None and second.refused and "Not executed" in second.feedback
    both = ToolReader(web, ToolFamily.HERMES, calls_per_turn=2).read(text, turn=4)
    assert [s.action for s in both.steps] == ["click [12]", "scroll [down]"]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (
            ToolCall("press", {"keys": "Enter"}),
            "unknown tool 'press'; the tools are: click(element_id)",
        ),
        (ToolCall("click", {}), "'click' is missing argument 'element_id'"),
        (ToolCall("click", {"element_id": "12"}), "'click' argument 'element_id' must be integer"),
        (ToolCall("click", {"element_id": True}), "must be integer, not true"),
        (ToolCall("click", {"element_id": 1, "x": 2}), "'click' has no argument 'x'"),
        (ToolCall("scroll", {"direction": "left"}), 'must be one of ["up", "down"]'),
        (ToolCall("click", [12]), "must be a JSON object"),
    ],
)
def test_a_call_is_checked_against_its_schema(web: ToolSet, call: ToolCall, error: str) -> None:
    with pytest.raises(ToolCallError) as raised:
        web.action_for(call)
    assert error in str(raised.value)


def test_actions_and_calls_map_both_ways(web: ToolSet) -> None:
    assert web.action_for(ToolCall("type", {"element_id": 3, "text": "hi"})) == "type [3] [hi] [1]"
    for action in ["click [7]", "type [3] [hello world] [1]", "type [3] [x] [0]", "scroll [up]"]:
        call = web.call_for(action)
        assert call is not None and web.action_for(call) == action
    assert web.call_for("type [3] [x] [1]") == ToolCall("type", {"element_id": 3, "text": "x"})
    assert web.call_for("click [me]") is None and web.call_for("go_back") is None
    # a typed argument captures only text of its type: the text argument takes the brackets
    assert web.call_for("type [8] [a] [b] [1]") == ToolCall(
        "type", {"element_id": 8, "text": "a] [b"}
    )


def test_the_family_is_recognised_from_the_template() -> None:
    assert detect_family(ChatTokenizer.from_dir(CHATML)) is ToolFamily.HERMES
    tok = CHATML / "tokenizer.json"
    created = ChatTokenizer.from_parts(tok, CHATML_TEMPLATE, {"eos_token": "<|im_end|>"})
    assert detect_family(created) is ToolFamily.HERMES
    mistral = "{{ bos_token }}{% if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}"
    assert (
        detect_family(ChatTokenizer.from_parts(tok, mistral, {"bos_token": "<s>"}))
        is ToolFamily.MISTRAL
    )
    ignores = "{% for m in messages %}{{ m.content }}{% endfor %}"
    with pytest.raises(ValueError, match="ignores `tools`"):
        detect_family(ChatTokenizer.from_parts(tok, ignores, {}))


def _noop_calls(turn: int) -> str:
    return write_call(
        ToolCall("act", {"action": "stop" if turn == 3 else "noop"}), ToolFamily.HERMES
    )


def test_tool_episodes_are_token_in_token_out(
    noop_server: EnvServerProcess, chat: ChatTokenizer
) -> None:
    # turns: a valid call, malformed JSON, no call at all, then the call that ends the episode
    replies = {
        0: _noop_calls(0),
        1: "<tool_call>{bad}</tool_call>",
        2: "I do nothing.",
        3: _noop_calls(3),
    }
    engine = ScriptedEngine(chat, scripted(lambda t: replies[t]))
    reader = tool_reader("noop", chat)
    spec = EnvSpec(ActionFormat.TOOLS, tools=reader)
    samples, agent = run(_episodes(noop_server.zmq, engine, chat, spec))
    [s] = samples
    check_sample_arrays(s)
    assert (s.status, s.turns, s.reward, s.drift) == ("done", 4, 1.0, False)
    assert agent.metrics.invalid_actions == 2 and agent.metrics.env_steps == 2
    text = chat.decode(s.input_ids.tolist())
    assert json.dumps(reader.tools.schemas[0]) in text  # the template wrote the schemas
    assert "<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>" in text
    assert "Invalid tool call: the tool call is not valid JSON" in text
    assert "<|im_start|>user\nInvalid action: the reply calls no tool." in text
    # the mask covers exactly the sampled turns, which are kept verbatim
    spans = s.turn_spans.reshape(-1, 2)
    masked = np.flatnonzero(s.loss_mask)
    assert masked.tolist() == [i for a, b in spans for i in range(a, b)]
    assert chat.decode(s.input_ids[spans[0][0] : spans[0][1]].tolist()) == replies[0] + "<|im_end|>"


async def _episodes(
    address: str, engine: ScriptedEngine, chat: ChatTokenizer, spec: EnvSpec
) -> Any:
    from agentgym_rl import _core
    from agentgym_rl.episode.agent import AgentLoop

    pool = _core.EnvPool([_core.EnvServer("noop", address)], step_timeout_s=5.0)
    agent = AgentLoop(
        engine, pool, chat, envs={"noop": spec}, max_model_len=4096, max_tokens_per_turn=64
    )
    try:
        return [await agent.run(plan("noop", 1, cap=6))], agent
    finally:
        await pool.shutdown()
