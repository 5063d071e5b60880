"""Evaluation in tool mode, in process: what `ChatApiPolicy` sends an OpenAI-compatible endpoint
(the env's `tools`) and what it sends back (the assistant's `tool_calls`, then one `role: tool`
message per call), played against the scripted stand-in (tests/scripted_chat.py, served through
httpx's ASGI transport) and a scripted env; malformed calls are invalid turns whose feedback
says what is wrong. Also the options that put envs in tool mode (`--action-format tools`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

import scripted_chat
from agentgym_rl.commands import evaluate as command
from agentgym_rl.config import ActionFormat
from agentgym_rl.config.loader import ConfigError
from agentgym_rl.env_discovery import env_traits
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.tools import ToolCall, ToolFamily, ToolReader, ToolSet, write_call
from agentgym_rl.episode.types import EnvSpec
from agentgym_rl.evaluation import EvalError, EvalOptions, run_evaluation
from agentgym_rl.evaluation.job import env_specs
from agentgym_rl.evaluation.policies import ApiSettings, ChatApiPolicy, FunctionPolicy
from agentgym_rl.evaluation.runner import EpisodeOutcome
from agentgym_rl.evaluation.tool_calls import assistant_message, read_api_calls
from agentgym_rl.trajectory import ChatTokenizer
from scripted_engine import CHATML

# tools of a made-up env: the tests do not depend on any real env's tool names
TOOLS = ToolSet.from_wire(
    [
        {
            "schema": {
                "type": "function",
                "function": {
                    "name": "move",
                    "description": "Move one cell.",
                    "parameters": {
                        "type": "object",
                        "properties": {"direction": {"type": "string", "enum": ["north", "south"]}},
                        "required": ["direction"],
                    },
                },
            },
            "action": "move {direction}",
        },
        {
            "schema": {
                "type": "function",
                "function": {
                    "name": "stop",
                    "description": "End the episode.",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
            "action": "stop",
        },
    ]
)
ENV = "babyai"  # the name only picks the prompt; the env is `ScriptedPool`


@dataclass(frozen=True)
class Outcome:
    observation: str
    score: float = 0.0
    done: bool = False
    invalid: bool = False


@dataclass(frozen=True)
class Started:
    episode: int = 7
    observation: str = "You are in a corridor."


@dataclass
class ScriptedPool:
    """The env pool's calls a text policy makes: `move ...` is answered, `stop` ends with 1.0."""

    actions: list[str] = field(default_factory=list)

    async def create(self, env: str) -> Started:
        return Started()

    async def reset(self, episode: int, data_idx: int) -> Started:
        return Started()

    async def close(self, episode: int) -> None:
        return None

    async def step(self, episode: int, action: str) -> Outcome:
        self.actions.append(action)
        if action == "stop":
            return Outcome("Stopped.", 1.0, done=True)
        return Outcome(f"You did {action}.")


def stand_in_client() -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=scripted_chat.app)
    return httpx.AsyncClient(transport=transport, base_url="http://stand-in/v1")


def play_api(
    monkeypatch: pytest.MonkeyPatch, script: Any, *, turn_cap: int = 2, calls_per_turn: int = 1
) -> tuple[EpisodeOutcome, ScriptedPool, list[dict[str, Any]]]:
    """One episode of the scripted env by `ChatApiPolicy` against the stand-in answering
    `script` (SCRIPTED_TOOL_CALL); also the request bodies it received."""
    monkeypatch.setenv("SCRIPTED_TOOL_CALL", json.dumps(script))
    pool = ScriptedPool()
    reader = ToolReader(TOOLS, ToolFamily.HERMES, calls_per_turn)
    spec = EnvSpec(ActionFormat.TOOLS, tools=reader)
    before = len(scripted_chat.RECEIVED), scripted_chat.STATS["rejected"]

    async def run() -> EpisodeOutcome:
        api = ApiSettings(base_url="http://stand-in/v1", model="scripted")
        policy = ChatApiPolicy(pool, api, {ENV: spec}, client=stand_in_client())  # type: ignore[arg-type]
        try:
            task = Task(f"{ENV}_0", ENV, 0)
            return await policy.episode(task, turn_cap=turn_cap, request_id="r")
        finally:
            await policy.aclose()

    out = asyncio.run(run())
    assert scripted_chat.STATS["rejected"] == before[1], scripted_chat.STATS["errors"]
    return out, pool, scripted_chat.RECEIVED[before[0] :]


def test_the_request_carries_the_tools_and_the_calls_go_back_with_their_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out, pool, bodies = play_api(monkeypatch, {"name": "move", "arguments": {"direction": "north"}})
    assert (out.status, out.turns) == ("turn_cap", 2)
    assert pool.actions == ["move north", "move north"]  # each turn's call stepped the env
    assert len(bodies) == 2
    for body in bodies:
        assert body["tools"] == TOOLS.schemas and body["tool_choice"] == "auto"
        assert "stop" not in body  # no stop strings in tool mode
    # the second request: the prefix, the assistant's call as the API wrote it, its answer
    system, user, assistant, answer = bodies[1]["messages"]
    assert (system["role"], user["role"]) == ("system", "user")
    assert user["content"] == "You are in a corridor."
    [call] = assistant["tool_calls"]
    assert assistant["content"] is None and call["type"] == "function"
    assert call["function"] == {"name": "move", "arguments": '{"direction": "north"}'}
    assert answer == {
        "role": "tool",
        "content": "You did move north.",
        "tool_call_id": call["id"],
    }
    # the outcome keeps the last call, not its answer (as text mode keeps no last observation)
    assert [m["role"] for m in out.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert out.messages[-1]["tool_calls"][0]["id"] != call["id"]  # a fresh id per call


def test_a_call_that_ends_the_episode_scores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    out, pool, _ = play_api(monkeypatch, {"name": "stop", "arguments": {}}, turn_cap=5)
    assert (out.status, out.turns, out.reward) == ("done", 1, 1.0)
    assert pool.actions == ["stop"]


@pytest.mark.parametrize(
    ("script", "feedback"),
    [
        (
            {"name": "move", "arguments": '{"direction": north}'},
            "Invalid tool call: the arguments of 'move' are not valid JSON (Expecting value at "
            'char 14): {"direction": north}.',
        ),
        (
            {"name": "fly", "arguments": {}},
            "Invalid tool call: unknown tool 'fly'; the tools are: move(direction), stop().",
        ),
        ({"name": "fly", "arguments": "{oops"}, "unknown tool 'fly'"),
        ({"name": "move", "arguments": {}}, "'move' is missing argument 'direction'"),
        ({"name": "move", "arguments": {"direction": "up"}}, "must be one of"),
        ({"name": "stop", "arguments": "not json"}, "the arguments of 'stop' are not valid JSON"),
    ],
)
def test_a_malformed_call_is_an_invalid_turn_that_says_why(
    monkeypatch: pytest.MonkeyPatch, script: dict[str, Any], feedback: str
) -> None:
    out, pool, bodies = play_api(monkeypatch, script)
    assert pool.actions == [] and (out.status, out.turns) == ("turn_cap", 2)
    answer = bodies[1]["messages"][3]  # accepted by the stand-in: it answers the call's id
    assert answer["role"] == "tool" and feedback in answer["content"], answer["content"]
    assert answer["tool_call_id"] == bodies[1]["messages"][2]["tool_calls"][0]["id"]


def test_a_reply_without_tool_calls_gets_feedback_as_a_user_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, pool, bodies = play_api(monkeypatch, None)
    assert pool.actions == []
    assistant, feedback = bodies[1]["messages"][2:]
    assert "tool_calls" not in assistant and assistant["content"].startswith("Thought:")
    assert feedback["role"] == "user"
    assert feedback["content"] == (
        "Invalid action: the reply calls no tool. Call one of the tools you are given (a "
        "function call, not text); the tools are: move(direction), stop()."
    )


def test_calls_beyond_the_limit_are_answered_not_executed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = [{"name": "move", "arguments": {"direction": "south"}}, {"name": "stop"}]
    out, pool, bodies = play_api(monkeypatch, calls)
    assert pool.actions == ["move south", "move south"]
    first, second = bodies[1]["messages"][3:]
    assert first["content"] == "You did move south."
    assert second["content"].startswith("Not executed: at most 1 tool call(s) per turn")
    ids = [c["id"] for c in bodies[1]["messages"][2]["tool_calls"]]
    assert [first["tool_call_id"], second["tool_call_id"]] == ids
    out, pool, _ = play_api(monkeypatch, calls, calls_per_turn=2)
    assert (out.status, pool.actions) == ("done", ["move south", "stop"])


def test_calls_without_ids_get_one_that_their_answers_carry() -> None:
    reader = ToolReader(TOOLS, ToolFamily.HERMES)
    sent: dict[str, Any] = {
        "role": "assistant",
        "content": "Moving.",
        "tool_calls": [{"function": {"name": "move", "arguments": '{"direction": "south"}'}}],
        "refusal": None,
    }
    reading = read_api_calls(reader, sent["tool_calls"], turn=3)
    assert [(s.id, s.action) for s in reading.steps] == [("call_3_0", "move south")]
    message = assistant_message(sent, reading)
    assert message == {
        "role": "assistant",
        "content": "Moving.",
        "tool_calls": [
            {
                "function": {"name": "move", "arguments": '{"direction": "south"}'},
                "id": "call_3_0",
                "type": "function",
            }
        ],
    }
    # no function name at all
    [step] = read_api_calls(reader, [{"id": "x", "type": "function"}], turn=0).steps
    assert step.action is None and 'needs a "function" with a string "name"' in step.feedback


def test_the_stand_in_refuses_what_the_openai_api_refuses() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    asked: list[dict[str, Any]] = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    answer = {"role": "tool", "tool_call_id": "c1", "content": "r"}
    check = scripted_chat.conversation_error
    assert check({"messages": [*asked, answer, {"role": "user", "content": "u"}]}) is None
    unanswered = check({"messages": [*asked, {"role": "user", "content": "u"}]}) or ""
    assert "did not have response messages: c1" in unanswered
    assert "did not have response messages" in (check({"messages": asked}) or "")
    stray = {"role": "tool", "tool_call_id": "c2", "content": "r"}
    assert "must be a response to a preceding message" in (
        check({"messages": [*asked, answer, stray]}) or ""
    )
    assert "must be a response" in (check({"messages": [asked[0], answer]}) or "")
    assert check({"messages": [asked[0]], "tools": [{"type": "function"}]}) is not None


def test_a_function_policy_may_call_tools_in_text_or_as_a_message() -> None:
    pool = ScriptedPool()
    spec = EnvSpec(ActionFormat.TOOLS, tools=ToolReader(TOOLS, ToolFamily.HERMES))
    replies: Iterator[str | dict[str, Any]] = iter(
        [
            write_call(ToolCall("move", {"direction": "north"}), ToolFamily.HERMES),
            "I do nothing.",
            {
                "content": None,
                "tool_calls": [
                    {"id": "a1", "type": "function", "function": {"name": "stop", "arguments": ""}}
                ],
            },
        ]
    )
    policy = FunctionPolicy(pool, lambda messages: next(replies), {ENV: spec})  # type: ignore[arg-type]
    out = asyncio.run(policy.episode(Task(f"{ENV}_0", ENV, 0), turn_cap=5, request_id="r"))
    assert (out.status, out.turns, out.reward) == ("done", 3, 1.0)
    assert pool.actions == ["move north", "stop"]
    roles = [m["role"] for m in out.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    assert out.messages[3] == {
        "role": "tool",
        "content": "You did move north.",
        "tool_call_id": "call_1_0",
    }
    assert out.messages[5]["content"].startswith("Invalid action: the reply calls no tool.")


def test_action_format_tools_puts_every_env_in_tool_mode() -> None:
    declared = ToolSet.from_wire(env_traits("babyai").tools)
    [spec] = env_specs(["babyai"], action_format="tools").values()
    assert spec.action_format is ActionFormat.TOOLS and spec.tools is not None
    assert spec.tools.tools.schemas == declared.schemas and spec.tools.family is ToolFamily.HERMES
    # a local model's calls are read in its template's layout (the fixture's: Hermes)
    chat = ChatTokenizer.from_dir(CHATML)
    [local] = env_specs(["babyai"], action_format="tools", tool_parser="auto", chat=chat).values()
    assert local.tools is not None and local.tools.family is ToolFamily.HERMES
    [named] = env_specs(
        ["babyai"], action_format={"babyai": "tools"}, tool_parser="llama3"
    ).values()
    assert named.tools is not None and named.tools.family is ToolFamily.LLAMA3
    [own] = env_specs(["babyai"]).values()
    assert own.action_format is ActionFormat(env_traits("babyai").action_format)
    assert own.tools is None
    with pytest.raises(EvalError, match=r"--action-format tools: env 'no_such_env'"):
        env_specs(["no_such_env"], action_format="tools")


def test_the_flags_and_their_checks() -> None:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    argv = ["--api-base", "http://h/v1", "--api-model", "m", "--split", "s.json"]
    options = command.eval_options(parser.parse_args(argv))
    assert (options.action_format, options.tool_parser, options.tool_calls_per_turn) == (
        None,
        "auto",
        1,
    )
    argv += ["--action-format", "tools", "--tool-parser", "mistral", "--tool-calls-per-turn", "2"]
    options = command.eval_options(parser.parse_args(argv))
    assert (options.action_format, options.tool_parser, options.tool_calls_per_turn) == (
        "tools",
        "mistral",
        2,
    )
    with pytest.raises(SystemExit):
        parser.parse_args([*argv, "--action-format", "json"])
    base = {"split": CHATML, "api_base": "http://h/v1", "api_model": "m"}
    with pytest.raises(ValidationError, match="Input should be 'react', 'tags'"):
        EvalOptions(**base, action_format="json")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        EvalOptions(**base, tool_calls_per_turn={"babyai": 0})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"--tool-calls-per-turn: .*greater than or equal to 1"):
        command.eval_options(parser.parse_args([*argv[:6], "--tool-calls-per-turn", "0"]))


def test_a_template_without_tools_is_refused_before_anything_starts(tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(CHATML.parent / "llama2", model)
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    split = tmp_path / "split.json"
    split.write_text(json.dumps([{"item_id": "babyai_0", "category": "c"}]))
    options = EvalOptions(
        split=[split],
        model=model,
        action_format=ActionFormat.TOOLS,
        env_addresses={"babyai": ["tcp://127.0.0.1:1"]},  # never reached
        progress=False,
    )
    with pytest.raises(EvalError, match="--action-format tools: the chat template ignores"):
        asyncio.run(run_evaluation(options))
