"""A fuzz of the three tool-call readers (issue 60): seeded replies, well-formed calls mutated
byte by byte, cut, doubled, nested deep, or random text, read as a turn reads them. Never an
exception; every reply that names no valid call is an invalid turn with its reason; every call
read is one of the tools with arguments that match its schema. `AGENTGYM_RL_FUZZ_CASES` sets
the number of cases (10,000 in CI, 100,000 by hand)."""

from __future__ import annotations

import json
import os
import random

import pytest
from tests.episode.test_tools import WEB_TOOLS

from agentgym_rl.episode.tools import ToolCall, ToolFamily, ToolReader, ToolSet, write_call

CASES = int(os.environ.get("AGENTGYM_RL_FUZZ_CASES", "10000"))
PIECES = [
    "<tool_call>",
    "</tool_call>",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "{",
    "}",
    "[",
    "]",
    '"',
    ":",
    ",",
    ";",
    "\\",
    '"name"',
    '"arguments"',
    '"parameters"',
    "click",
    "type",
    "null",
    "true",
    "1e999",
    "-0",
    "\u2028",
    "\x00",
    "é",
    "\ud800",
    " ",
    "\n",
]


def _call(rng: random.Random) -> ToolCall:
    if rng.random() < 0.5:  # a call the tools accept
        return rng.choice(
            [
                ToolCall("click", {"element_id": rng.randint(0, 99)}),
                ToolCall("scroll", {"direction": rng.choice(["up", "down"])}),
                ToolCall("type", {"element_id": 3, "text": "lamp " * rng.randint(0, 3)}),
            ]
        )
    name = rng.choice(["click", "type", "scroll", "stop", ""])
    args: object = rng.choice(
        [
            {"element_id": rng.randint(-5, 99)},
            {"element_id": str(rng.randint(0, 9)), "text": "x" * rng.randint(0, 40)},
            {"direction": rng.choice(["up", "down", "left", 3])},
            {"element_id": 1, "text": "a", "press_enter": rng.choice([True, "yes", None])},
            [1, 2],
            "not an object",
            None,
        ]
    )
    return ToolCall(name, args)


def _mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(6)
        i = rng.randint(0, len(text))
        if kind == 0 and text:  # delete a span
            text = text[:i] + text[i + rng.randint(1, 8) :]
        elif kind == 1:  # insert a piece of some layout
            text = text[:i] + rng.choice(PIECES) + text[i:]
        elif kind == 2 and text:  # cut off
            text = text[:i]
        elif kind == 3:  # the same call again, or another family's
            text = text + rng.choice(["", ";", "\n"]) + text[: rng.randint(0, len(text))]
        elif kind == 4:  # nesting deeper than any parser recurses
            depth = rng.choice([10, 1000, 100_000])
            text = text[:i] + "[" * depth + text[i:]
        else:  # one character replaced
            text = text[:i] + chr(rng.randint(0, 0x2FFF)) + text[i + 1 :]
    return text


def _reply(rng: random.Random, family: ToolFamily) -> str:
    roll = rng.random()
    if roll < 0.1:  # random text
        return "".join(rng.choice([*PIECES, "a", "b", "0"]) for _ in range(rng.randint(0, 60)))
    text = write_call(_call(rng), rng.choice(list(ToolFamily)) if roll < 0.2 else family)
    if rng.random() < 0.3:
        text = "Thought: click it.\n" + text
    return text if roll < 0.3 else _mutate(text, rng)


@pytest.mark.parametrize("family", list(ToolFamily))
def test_no_reply_breaks_a_reader_and_every_bad_call_says_why(family: ToolFamily) -> None:
    tools = ToolSet.from_wire(WEB_TOOLS)
    reader = ToolReader(tools, family, calls_per_turn=2)
    rng = random.Random(f"fuzz-{family.value}")
    kinds = {"valid": 0, "invalid": 0, "no call": 0}
    for case in range(CASES // len(ToolFamily)):
        text = _reply(rng, family)
        reading = reader.read(text, turn=1)  # must not raise
        if not reading.steps:
            assert reading.feedback.startswith("Invalid action"), (case, text)
            kinds["no call"] += 1
            continue
        for step in reading.steps:
            if step.action is None:
                assert step.feedback, (case, text)  # an invalid (or refused) call says why
                kinds["invalid"] += 1
                continue
            # a call read is a tool's call with arguments its schema allows
            call = tools.call_for(step.action)
            assert call is not None and call.name in tools.names, (case, text, step)
            json.dumps(call.arguments)
            kinds["valid"] += 1
    # the cases reach every outcome, so the assertions above were exercised
    print(family.value, kinds)
    assert all(n > CASES // 100 for n in kinds.values()), kinds
