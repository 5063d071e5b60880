"""SciWorld's actions as tools: one per action template of the simulator (`getPossibleActions`),
written as its valid-action list writes them ("go to", "pour ... into"), plus `choose` for the
numbered list an ambiguous action gets. "reset task" is left out: it restarts the task mid-episode.
"""

from __future__ import annotations

from agentgym_envs.server.tools import Param, Tool

_OBJ = "An object as the observation names it, e.g. 'thermometer' or 'door to kitchen'."


def _obj(name: str = "object", description: str = _OBJ) -> Param:
    return Param(name, "string", description)


def _one(name: str, description: str, verb: str) -> Tool:
    """A tool of one object: `verb {object}`."""
    return Tool(name, description, f"{verb} {{object}}", (_obj(),))


SCIWORLD_TOOLS = (
    Tool("look_around", "Describe the room you are in.", "look around"),
    _one("look_at", "Describe an object.", "look at"),
    _one("look_in", "Describe what a container holds.", "look in"),
    _one("read", "Read an object with writing on it (a book, a label).", "read"),
    Tool("inventory", "List what you carry.", "inventory"),
    Tool("task", "Repeat the task description.", "task"),
    Tool(
        "go_to",
        "Go to an adjacent room (its door must be open).",
        "go to {location}",
        (_obj("location", "The room, e.g. 'kitchen'."),),
    ),
    _one("open", "Open a door or container.", "open"),
    _one("close", "Close a door or container.", "close"),
    _one("pick_up", "Pick up an object into your inventory.", "pick up"),
    _one("put_down", "Put down an object you carry.", "put down"),
    Tool(
        "move",
        "Move an object into a container or place.",
        "move {object} to {destination}",
        (_obj(), _obj("destination", "Where to, e.g. 'red box' or 'inventory'.")),
    ),
    Tool(
        "pour",
        "Pour an object (a liquid, a substance) into a container.",
        "pour {object} into {container}",
        (_obj(), _obj("container", "The container poured into.")),
    ),
    Tool(
        "dunk",
        "Dunk an object into a container.",
        "dunk {object} into {container}",
        (_obj(), _obj("container", "The container dunked into.")),
    ),
    _one("mix", "Mix the contents of a container.", "mix"),
    _one("activate", "Turn on a device (a stove, a sink).", "activate"),
    _one("deactivate", "Turn off a device.", "deactivate"),
    Tool(
        "use",
        "Use an object (a tool, a device) on another.",
        "use {object} on {target}",
        (_obj(), _obj("target", "The object it is used on.")),
    ),
    Tool(
        "connect",
        "Connect two objects (electrical terminals, wires).",
        "connect {object} to {target}",
        (_obj(), _obj("target", "The object connected to.")),
    ),
    _one("disconnect", "Disconnect an object.", "disconnect"),
    _one("eat", "Eat an object.", "eat"),
    _one("flush", "Flush an object (a toilet).", "flush"),
    _one(
        "focus_on",
        "Focus on the object the task names. Focusing on any other object fails the task.",
        "focus on",
    ),
    Tool("wait", "Wait 10 steps.", "wait"),
    Tool("wait1", "Wait 1 step.", "wait1"),
    Tool(
        "choose",
        "Answer the numbered list an ambiguous action gets with the number of your choice.",
        "{number}",
        (Param("number", "integer", "The number before the action you meant."),),
    ),
)
