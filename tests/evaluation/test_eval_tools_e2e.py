"""Evaluation in tool mode against a real BabyAI server. `agentgym-rl eval --api-base URL
--action-format tools` with the scripted OpenAI-compatible stand-in (tests/scripted_chat.py in a
uvicorn process) answering with `tool_calls`: the request carries the env's `tools`, the calls
step the env (a task the call solves is solved), and every conversation sent back (the
assistant's `tool_calls`, the `role: tool` answers) is one the API accepts. A malformed call is
an invalid turn whose feedback names the problem (`agentgym_rl.play` keeps the messages). The
local path (`--model`: the training agent loop) in tool mode, on a scripted engine over the
ChatML fixture template, whose calls are read in the template's (Hermes) layout."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from agentgym_rl.cli import main
from agentgym_rl.config.rollout import ActionFormat
from agentgym_rl.env_discovery import env_traits
from agentgym_rl.episode.log import read_episodes
from agentgym_rl.episode.tools import ToolCall, ToolFamily, ToolSet, write_call
from agentgym_rl.evaluation import EvalOptions, run_evaluation
from agentgym_rl.evaluation.episodes import play
from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.trajectory import ChatTokenizer
from asgi_procs import AsgiProc
from scripted_engine import CHATML, ScriptedEngine

pytestmark = pytest.mark.process

SOLVED = "babyai_14"  # BabyAI-GoToRedBall-v0, seed 0: `go to red ball 1` solves it
SOLVING_ACTION = "go to red ball 1"


def _call(action: str) -> dict[str, Any]:
    """The call of BabyAI's declared tools that writes `action` (whatever the tools are named)."""
    call = ToolSet.from_wire(env_traits("babyai").tools).call_for(action)
    assert call is not None, f"no tool of babyai writes {action!r}"
    return {"name": call.name, "arguments": call.arguments}


def _stand_in(script: Any) -> AsgiProc:
    variables = {"SCRIPTED_TOOL_CALL": json.dumps(script)}
    return AsgiProc("scripted_chat:app", variables, ready_path="/v1/models").start()


def _stats(chat: AsgiProc) -> dict[str, Any]:
    status, body = chat.get("/scripted/stats")
    assert status == 200
    return dict(json.loads(body))


@pytest.fixture(scope="module")
def solving_chat() -> Iterator[AsgiProc]:
    proc = _stand_in(_call(SOLVING_ACTION))
    yield proc
    proc.stop()


def test_eval_over_an_api_in_tool_mode(
    babyai_server: EnvServerProcess, solving_chat: AsgiProc, tmp_path: Path
) -> None:
    split = tmp_path / "split.json"
    rows = [{"item_id": SOLVED, "category": "GoToRedBall"}]
    rows += [{"item_id": f"babyai_{i}", "category": "other"} for i in (0, 1)]
    split.write_text(json.dumps(rows))
    out = tmp_path / "eval"
    argv = ["eval", "--api-base", f"{solving_chat.url}/v1", "--api-model", "scripted"]
    argv += ["--split", str(split), "--env-address", f"babyai={babyai_server.zmq}"]
    argv += ["--action-format", "tools", "--turn-cap", "3", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    data = json.loads((out / "eval.json").read_text())
    assert data["env_failures"] == {"episodes": 0, "reasons": {}}
    assert set(data["statuses"]) <= {"done", "turn_cap"}, data["statuses"]
    solved = next(e for e in data["episodes"] if e["item_id"] == SOLVED)
    assert (solved["status"], solved["success"]) == ("done", True)
    assert data["meta"]["options"]["action_format"] == "tools"
    stats = _stats(solving_chat)
    # every request offered the tools, and the stand-in accepted every conversation
    assert stats["requests"] >= 3 and stats["with_tools"] == stats["requests"]
    assert stats["rejected"] == 0, stats["errors"]


def test_the_calls_step_the_env_and_their_results_come_back_as_tool_messages(
    babyai_server: EnvServerProcess, solving_chat: AsgiProc
) -> None:
    url, addresses = f"{solving_chat.url}/v1", {"babyai": [babyai_server.zmq]}
    [solved, other] = play(
        url,
        [SOLVED, "babyai_0"],
        model="scripted",
        turn_cap=2,
        env_addresses=addresses,
        action_format="tools",
    )
    assert (solved.status, solved.turns, solved.success) == ("done", 1, True)
    # an unsolved task: two turns, the first answered by the env's observation
    assert other.turns == 2 and other.status in ("turn_cap", "done")
    system, _, assistant, answer, last = other.messages
    assert "tool" in system["content"]  # the tool-mode system prompt
    [call] = assistant["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == _call(SOLVING_ACTION)["arguments"]
    assert answer["role"] == "tool" and answer["tool_call_id"] == call["id"]
    assert answer["content"] and not answer["content"].startswith("Invalid tool call")
    assert last["tool_calls"][0]["id"] != call["id"]
    assert _stats(solving_chat)["rejected"] == 0


def test_a_malformed_call_is_an_invalid_turn_with_feedback(
    babyai_server: EnvServerProcess, tmp_path: Path
) -> None:
    malformed = {**_call(SOLVING_ACTION), "arguments": '{"object": red ball 1}'}
    chat = _stand_in([malformed])
    try:
        addresses = {"babyai": [babyai_server.zmq]}
        [episode] = play(
            f"{chat.url}/v1",
            [SOLVED],
            model="scripted",
            turn_cap=2,
            env_addresses=addresses,
            action_format="tools",
        )
        stats = _stats(chat)
    finally:
        chat.stop()
    assert (episode.status, episode.turns, episode.success) == ("turn_cap", 2, False)
    answer = episode.messages[3]
    assert answer["role"] == "tool"
    name = malformed["name"]
    assert answer["content"].startswith(
        f"Invalid tool call: the arguments of {name!r} are not valid JSON"
    ), answer["content"]
    assert stats["requests"] == stats["with_tools"] == 2
    assert stats["rejected"] == 0, stats["errors"]
    assert asdict(episode)["failure"] is None


def test_local_eval_in_tool_mode_reads_calls_in_the_templates_layout(
    babyai_server: EnvServerProcess, tmp_path: Path
) -> None:
    chat = ChatTokenizer.from_dir(CHATML)
    call = _call(SOLVING_ACTION)
    reply = write_call(ToolCall(call["name"], call["arguments"]), ToolFamily.HERMES)
    engine = ScriptedEngine(chat, lambda prompt, request_id: reply)
    engine.model_dir = CHATML  # type: ignore[attr-defined]  # what `eval --model` loads
    split = tmp_path / "split.json"
    split.write_text(json.dumps([{"item_id": SOLVED, "category": "GoToRedBall"}]))
    out = tmp_path / "eval"
    options = EvalOptions(
        split=[split],
        env_addresses={"babyai": [babyai_server.zmq]},
        turn_cap=3,
        out=out,
        progress=False,
        action_format=ActionFormat.TOOLS,
    )
    report = asyncio.run(run_evaluation(options, engine=engine))
    [record] = report.records
    assert (record.status, record.success) == ("done", True)
    [episode] = read_episodes(out / "episodes.jsonl")
    text = chat.decode(list(episode.input_ids))
    schemas = ToolSet.from_wire(env_traits("babyai").tools).schemas
    assert json.dumps(schemas[0]) in text  # the template was given the tools
    assert reply in text
