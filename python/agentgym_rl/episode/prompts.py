"""System prompts and first user messages, per environment.

Contract: `episode_prefix(env, first_observation, fmt, system_prompt=None)` is the chat prefix of
an episode: a system message (the configured override, else the prompt the env declares, else
the generic one of its action format) and one user message holding the env's first observation.
Observations after it are sent as plain user messages (in tool mode as `tool` messages:
`episode/tools/`).
"""

from __future__ import annotations

from agentgym_rl.config import ActionFormat
from agentgym_rl.env_discovery import env_traits

_REACT_RULES = (
    "Each turn, first think on a line starting with 'Thought:', then give exactly one action on "
    "a line starting with 'Action:'. Only the last 'Action:' line is executed."
)

GENERIC_PROMPTS: dict[ActionFormat, str] = {
    ActionFormat.REACT: "You are an agent acting in a text environment. " + _REACT_RULES,
    ActionFormat.TAGS: (
        "Answer the question. You may search a document index as often as needed with "
        "<search> query </search>; results come back inside <information> ... </information>. "
        "When you know the answer, reply with <answer> short answer </answer>."
    ),
    ActionFormat.WEBARENA: (
        "You are a web agent. Each observation is the accessibility tree of the current page. "
        "Think step by step, then end with one command in a code fence, e.g. ```click [1234]```. "
        "Issue ```stop [answer]``` when the task is done."
    ),
    ActionFormat.TOOLS: (
        "You are an agent acting in an environment{about}. Act by calling one of the tools "
        "you are given, one call per turn; its result comes back as the tool's response."
    ),
}


def system_prompt(env: str, fmt: ActionFormat, override: str | None = None) -> str:
    """The override, else (text formats) the env's own prompt or its format's generic one. In
    tool mode the env's prompt is not used (it teaches a text format); the generic tool prompt
    names the env by its description, and the template writes the tools after it."""
    if override is not None:
        return override
    traits = env_traits(env)
    if fmt is ActionFormat.TOOLS:
        about = f" ({traits.description})" if traits.description else ""
        return GENERIC_PROMPTS[fmt].format(about=about)
    return traits.system_prompt or GENERIC_PROMPTS[fmt]


def episode_prefix(
    env: str, first_observation: str, fmt: ActionFormat, override: str | None = None
) -> list[dict[str, str]]:
    """The messages an episode starts from."""
    return [
        {"role": "system", "content": system_prompt(env, fmt, override)},
        {"role": "user", "content": first_observation},
    ]


def observation_message(observation: str) -> dict[str, str]:
    return {"role": "user", "content": observation}
