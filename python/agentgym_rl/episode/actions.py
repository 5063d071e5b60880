"""Reading the action out of one generated turn, per env format.

Contract: `parse_action(text, fmt)` returns a `ParsedAction` that is either valid (`action` is
what goes to the env's `/step`) or invalid (`action` is None and `feedback` is the observation
sent back to the model instead of stepping the env; the turn counts as an invalid action).
Formats:
- REACT: the last line starting with `Action:` wins (case-insensitive, markdown bullets/bold
  allowed); `Thought:` lines and other text are ignored; surrounding quotes/backticks and a
  trailing period are stripped.
- TAGS (Search-R1): the first complete `<search>...</search>` or `<answer>...</answer>`; the
  engine stops at the first closing tag there, so later text is not part of the turn. The env
  receives the canonical `<tag>content</tag>`.
- WEBARENA: the last ``` fence holding a command, else the last line that is one (an `Action:`
  label before it allowed); commands are checked for their argument shape (`click [12]`,
  `type [12] [text] [1]`, `scroll [down]`, ...).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from agentgym_rl.config import ActionFormat
from agentgym_rl.env_discovery import env_traits


@dataclass(frozen=True, slots=True)
class ParsedAction:
    """A valid action, or the feedback that replaces the env's observation."""

    action: str | None
    feedback: str | None = None

    @property
    def valid(self) -> bool:
        return self.action is not None


def invalid(reason: str, hint: str) -> ParsedAction:
    return ParsedAction(None, f"Invalid action format: {reason}. {hint}")


# --- ReAct ---

_REACT_LINE = re.compile(r"^[ \t>*#-]*action[ \t*]*:[ \t*]*(.*)$", re.IGNORECASE | re.MULTILINE)
_REACT_HINT = (
    "Reply with your reasoning on a line starting with 'Thought:' and then exactly one action "
    "on a line starting with 'Action:', e.g. 'Action: turn left'."
)


def parse_react(text: str) -> ParsedAction:
    found = _REACT_LINE.findall(text)
    if not found:
        return invalid("no line starting with 'Action:'", _REACT_HINT)
    action = found[-1].strip().strip("`\"'").strip()
    if action.endswith(".") and not action.endswith(".."):
        action = action[:-1].rstrip()
    if not action:
        return invalid("the 'Action:' line is empty", _REACT_HINT)
    return ParsedAction(action)


# --- Search-R1 tags ---

_TAG = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_TAG_HINT = (
    "Search with <search> query </search> or give the final answer with <answer> answer </answer>."
)


def parse_tags(text: str) -> ParsedAction:
    match = _TAG.search(text)
    if match is None:
        return invalid("no <search>...</search> or <answer>...</answer>", _TAG_HINT)
    tag, content = match.group(1).lower(), " ".join(match.group(2).split())
    if not content:
        return invalid(f"the <{tag}> tag is empty", _TAG_HINT)
    return ParsedAction(f"<{tag}>{content}</{tag}>")


# --- WebArena commands ---

_ARG = r"\[[^\]\n]*\]"
_WEBARENA_COMMANDS = {
    "click": r"click \[\d+\]",
    "hover": r"hover \[\d+\]",
    "type": rf"type \[\d+\] {_ARG}( \[[01]\])?",
    "press": rf"press {_ARG}",
    "scroll": r"scroll \[(up|down)\]",
    "new_tab": r"new_tab",
    "tab_focus": r"tab_focus \[\d+\]",
    "close_tab": r"close_tab",
    "goto": rf"goto {_ARG}",
    "go_back": r"go_back",
    "go_forward": r"go_forward",
    "stop": rf"stop( {_ARG})?",
}
_WEBARENA_FULL = {k: re.compile(rf"^{v}$") for k, v in _WEBARENA_COMMANDS.items()}
_FENCE = re.compile(r"```(?:[a-zA-Z]*\n)?(.*?)```", re.DOTALL)
_WEBARENA_HINT = (
    "End with one command in a code fence, e.g. ```click [1234]```; commands: click [id], "
    "hover [id], type [id] [text] [0|1], press [keys], scroll [up|down], new_tab, tab_focus "
    "[index], close_tab, goto [url], go_back, go_forward, stop [answer]."
)


_ACTION_LABEL = re.compile(r"^[ \t>*#-]*action[ \t*]*:[ \t*]*", re.IGNORECASE)


def _webarena_command(candidate: str) -> str | None:
    # a ReAct-style `Action: click [12]` line (or `Action: ```click [12]```) counts as plain too
    line = " ".join(_ACTION_LABEL.sub("", candidate.strip()).strip("`").split())
    name = line.split(" ", 1)[0] if line else ""
    pattern = _WEBARENA_FULL.get(name)
    return line if pattern is not None and pattern.match(line) else None


def parse_webarena(text: str) -> ParsedAction:
    for block in reversed(_FENCE.findall(text)):
        command = _webarena_command(block)
        if command is not None:
            return ParsedAction(command)
    for line in reversed(text.splitlines()):
        command = _webarena_command(line)
        if command is not None:
            return ParsedAction(command)
    return invalid("no valid command found", _WEBARENA_HINT)


STOP_STRINGS: dict[ActionFormat, tuple[str, ...]] = {
    # a turn ends at its first closing tag: the model never writes the <information> block the
    # env answers with (it would be trained on text the env is meant to supply)
    ActionFormat.TAGS: ("</search>", "</answer>"),
}
"""Strings that end a generated turn, per format (kept in the turn's text and tokens)."""


def stop_strings(fmt: ActionFormat) -> tuple[str, ...]:
    """The strings the engine stops a turn of format `fmt` at (none: only stop tokens)."""
    return STOP_STRINGS.get(fmt, ())


def restore_stop_string(text: str, fmt: ActionFormat) -> str:
    """`text` with the stop string an OpenAI-compatible API cut off put back: such APIs end the
    reply before the stop string, so a tag the reply opened last is closed again."""
    opened = [(text.rfind("<" + s[2:]), s) for s in stop_strings(fmt)]
    last, stop = max(opened, default=(-1, ""))
    if last < 0 or stop in text[last:]:
        return text
    return text + stop


def env_format(env: str) -> ActionFormat:
    """The action format `env` declares its actions are written in (ReAct lines by default)."""
    return ActionFormat(env_traits(env).action_format)


def render_action(action: str, fmt: ActionFormat, thought: str | None = None) -> str:
    """The assistant turn that plays `action` in format `fmt`, as its parser reads it back (a
    ReAct turn after a `Thought:` line when one is given)."""
    if fmt is ActionFormat.TAGS:
        return action
    if fmt is ActionFormat.WEBARENA:
        return f"```{action}```"
    if thought is None:
        return f"Action: {action}"
    return f"Thought: {thought}\nAction: {action}"


PARSERS: dict[ActionFormat, Callable[[str], ParsedAction]] = {
    ActionFormat.REACT: parse_react,
    ActionFormat.TAGS: parse_tags,
    ActionFormat.WEBARENA: parse_webarena,
}


def parse_action(text: str, fmt: ActionFormat) -> ParsedAction:
    """Parse one generated turn's text (special tokens already left out) in format `fmt`."""
    return PARSERS[fmt](text)
