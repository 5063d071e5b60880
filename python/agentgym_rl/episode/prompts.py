"""System prompts and first user messages, per environment.

Contract: `episode_prefix(env, first_observation, fmt, system_prompt=None)` is the chat prefix of
an episode: a system message (the env's built-in prompt, or the configured override) and one
user message holding the env's first observation. Observations after it are sent as plain user
messages. An env without a built-in prompt gets a generic one for its action format.
"""

from __future__ import annotations

from agentgym_rl.config import ActionFormat

_REACT_RULES = (
    "Each turn, first think on a line starting with 'Thought:', then give exactly one action on "
    "a line starting with 'Action:'. Only the last 'Action:' line is executed."
)

SYSTEM_PROMPTS: dict[str, str] = {
    "babyai": (
        "You are an agent in a BabyAI grid world. Each observation states your goal, what you "
        "see relative to you, what you carry and the available actions. Choose one of the "
        "available actions, written exactly as listed (e.g. 'go to red ball 1'). " + _REACT_RULES
    ),
    "textcraft": (
        "You craft Minecraft items. Use 'get N item' to fetch base items, 'craft N X using N a, "
        "N b' to follow a listed recipe and 'inventory' to list what you hold. Reach the goal "
        "item. " + _REACT_RULES
    ),
    "sciworld": (
        "You are an agent in ScienceWorld, a text world for science experiments. Complete the "
        "task you are given. Actions (OBJ: an object, LOC: a place): look around, look at OBJ, "
        "look in OBJ, read OBJ, inventory, task, go to LOC, open OBJ, close OBJ, pick up OBJ, "
        "put down OBJ, move OBJ to OBJ, pour OBJ into OBJ, dunk OBJ into OBJ, mix OBJ, "
        "activate OBJ, deactivate OBJ, use OBJ, use OBJ on OBJ, connect OBJ to OBJ, disconnect "
        "OBJ, eat OBJ, flush OBJ, focus on OBJ (only on the object the task names: focusing on "
        "the wrong one fails the task), wait (10 steps), wait1 (1 step). When the world asks "
        "which object you mean, answer with the number of your choice. " + _REACT_RULES
    ),
    "searchqa": (
        "Answer the question. You may search a document index as often as needed with "
        "<search> query </search>; results come back inside <information> ... </information>. "
        "When you know the answer, reply with <answer> short answer </answer>."
    ),
    "webarena": (
        "You are a web agent. Each observation is the accessibility tree of the current page. "
        "Think step by step, then end with one command in a code fence, e.g. ```click [1234]```. "
        "Issue ```stop [answer]``` when the task is done."
    ),
    "noop": "You are a test agent. " + _REACT_RULES,
}

GENERIC_PROMPTS: dict[ActionFormat, str] = {
    ActionFormat.REACT: "You are an agent acting in a text environment. " + _REACT_RULES,
    ActionFormat.TAGS: SYSTEM_PROMPTS["searchqa"],
    ActionFormat.WEBARENA: SYSTEM_PROMPTS["webarena"],
}


def system_prompt(env: str, fmt: ActionFormat, override: str | None = None) -> str:
    if override is not None:
        return override
    return SYSTEM_PROMPTS.get(env, GENERIC_PROMPTS[fmt])


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
