"""The web envs' actions as tools: one per WebArena command (`actions.py`), each writing the
command as `parse` reads it. `type` always writes its Enter flag (`[1]`, the default, or `[0]`).
"""

from __future__ import annotations

from agentgym_envs.server.tools import Param, Tool

_ELEMENT = Param(
    "element_id",
    "integer",
    "The element's id: the number in [brackets] before it in the current observation.",
)

WEB_TOOLS = (
    Tool("click", "Click an element of the page.", "click [{element_id}]", (_ELEMENT,)),
    Tool("hover", "Move the mouse over an element.", "hover [{element_id}]", (_ELEMENT,)),
    Tool(
        "type",
        "Click an element (a text box) and type text into it; on a combobox, choose the option "
        "with that label.",
        "type [{element_id}] [{text}] [{press_enter}]",
        (
            _ELEMENT,
            Param("text", "string", "The text to type."),
            Param(
                "press_enter",
                "boolean",
                "Press Enter after typing (default true).",
                required=False,
                default=True,
            ),
        ),
    ),
    Tool(
        "press",
        "Press a key or key combination on the current page.",
        "press [{keys}]",
        (Param("keys", "string", "Key names joined by '+', e.g. 'Enter' or 'Control+a'."),),
    ),
    Tool(
        "scroll",
        "Scroll the page by one screen.",
        "scroll [{direction}]",
        (Param("direction", "string", "Which way to scroll.", ("up", "down")),),
    ),
    Tool(
        "goto",
        "Open a URL in the current tab.",
        "goto [{url}]",
        (Param("url", "string", "The URL."),),
    ),
    Tool("go_back", "Go back to the previous page.", "go_back"),
    Tool("go_forward", "Go forward to the next page (after go_back).", "go_forward"),
    Tool("new_tab", "Open a new, empty tab and switch to it.", "new_tab"),
    Tool(
        "tab_focus",
        "Switch to another tab.",
        "tab_focus [{index}]",
        (Param("index", "integer", "The tab's number as the tab line shows it, from 0."),),
    ),
    Tool("close_tab", "Close the current tab.", "close_tab"),
    Tool(
        "stop",
        "End the episode when the task is done, with the answer when the task asks for one.",
        "stop [{answer}]",
        (
            Param(
                "answer",
                "string",
                "The answer (leave it out when the task asks for none).",
                required=False,
                default="",
            ),
        ),
    ),
)
