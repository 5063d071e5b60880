"""One episode's turn rule in tool mode: what a reply's calls step (`ToolReader`; see the package
docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentgym_rl.env_discovery import env_traits
from agentgym_rl.episode.tools.families import detect_family, parse_tool_calls, write_call
from agentgym_rl.episode.tools.schemas import ToolCall, ToolCallError, ToolFamily, ToolSet
from agentgym_rl.trajectory import ChatTokenizer


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One call of a reply: its id and the action it stands for, or why it is not stepped
    (`refused`: beyond `calls_per_turn`, which is not an invalid action)."""

    id: str
    action: str | None
    feedback: str = ""
    refused: bool = False


@dataclass(frozen=True, slots=True)
class ToolReading:
    """One reply read in tool mode: its calls in order, or (no call at all) the feedback that
    goes back as a user message."""

    steps: tuple[ToolStep, ...]
    feedback: str = ""


@dataclass(frozen=True)
class ToolReader:
    """One env's tools as the turn rule reads a reply in tool mode."""

    tools: ToolSet
    family: ToolFamily
    calls_per_turn: int = 1

    def hint(self) -> str:
        example = write_call(self.tools.example(), self.family)
        return f"Call one tool per turn, e.g. {example}. The tools are: {self.tools.describe()}."

    def call_id(self, turn: int, index: int) -> str:
        """The id of a call written without one (Mistral's templates take 9 letters/digits)."""
        if self.family is ToolFamily.MISTRAL:
            return f"c{turn:05d}{index:03d}"
        return f"call_{turn}_{index}"

    def read(self, text: str, turn: int) -> ToolReading:
        """The calls of a reply's text, in this reader's family layout."""
        parsed = parse_tool_calls(text, self.family)
        if not parsed.found:
            return ToolReading((), f"Invalid action: the reply calls no tool. {self.hint()}")
        if parsed.error is not None:
            note = f"Invalid tool call: {parsed.error}. {self.hint()}"
            return ToolReading((ToolStep(self.call_id(turn, 0), None, note),))
        return self.read_calls(parsed.calls, turn)

    def read_calls(self, calls: Sequence[ToolCall], turn: int) -> ToolReading:
        """Calls already structured (an API's `tool_calls`), checked and turned into actions."""
        if not calls:
            return ToolReading((), f"Invalid action: the reply calls no tool. {self.hint()}")
        steps = []
        for i, call in enumerate(calls):
            call_id = call.id or self.call_id(turn, i)
            if i >= self.calls_per_turn:
                note = (
                    f"Not executed: at most {self.calls_per_turn} tool call(s) per turn are "
                    f"executed; call {call.name!r} again next turn if it is still needed."
                )
                steps.append(ToolStep(call_id, None, note, refused=True))
                continue
            try:
                steps.append(ToolStep(call_id, self.tools.action_for(call)))
            except ToolCallError as e:
                steps.append(ToolStep(call_id, None, f"Invalid tool call: {e}."))
        return ToolReading(tuple(steps))


def tool_message(content: str, call_id: str) -> dict[str, str]:
    """A tool result as the chat template receives it."""
    return {"role": "tool", "content": content, "tool_call_id": call_id}


def tool_reader(
    env: str, chat: ChatTokenizer | None, parser: str = "auto", calls_per_turn: int = 1
) -> ToolReader:
    """`env`'s tools (as its class declares them) read in the layout `parser` names, or, for
    `auto`, the one `chat`'s template writes (no chat: an API's structured calls, whose layout
    only the feedback's example shows: Hermes)."""
    rows = env_traits(env).tools
    if not rows:
        raise ValueError(
            f"env {env!r}: its tools are unknown here (its class cannot be imported on this "
            f"machine: install its package)"
        )
    if parser != "auto":
        family = ToolFamily(parser)
    else:
        family = ToolFamily.HERMES if chat is None else detect_family(chat)
    return ToolReader(ToolSet.from_wire(rows), family, calls_per_turn)
