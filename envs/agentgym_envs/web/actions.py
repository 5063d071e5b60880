"""The web env's actions, in WebArena's command syntax, and the browser state they act on.

`parse(text)` reads exactly one command: the bare command (what the rollout side sends), or the
first block fenced in ``` of a whole reply (what AgentGym's WebArena client sends, its prompt
asking for "... the next action I will perform is ```click [1234]```"):
`click [id]`, `hover [id]`, `type [id] [text] [0|1]` (1, the default, presses Enter after),
`press [keys]` (Playwright key names: `Enter`, `Control+a`, ...), `scroll [up|down]`,
`goto [url]`, `new_tab`, `go_back`, `go_forward`, `tab_focus [n]`, `close_tab`,
`stop [answer]` (`stop` alone is an empty answer). Anything else raises `InvalidAction` with
a message saying what is wrong; so does an id that the last observation did not show.

`Tabs` is an episode's browser state: its context, the current page, the id book and the
targets of the last observation. `execute(command)` acts: click/hover/type at the centre of the
element's box, as WebArena does (an element's box is measured again just before, in case it
moved; a text node's is the observed one), except `type` on a `<select>` (a combobox), which
chooses the option with that label or value (its native pop-up is not in the page, so it could
not be clicked); then it waits for a navigation the action started and for the page's `load`.
`stop` is not executed here (the env ends the episode).

`random_command(observation, objective, rng)` is a valid command drawn at random from what an
observation shows, knowing nothing of which one helps (the web episode's `random_action`).
"""

from __future__ import annotations

import ast
import contextlib
import random
import re
from collections.abc import Container
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentgym_envs.web.observation import ID_ATTR, IdBook, Target, Tree, snapshot

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, CDPSession, Page

_ARG = r"\[([^\]\n]*)\]"
_PATTERNS: dict[str, re.Pattern[str]] = {
    "click": re.compile(r"^click \[(\d+)\]$"),
    "hover": re.compile(r"^hover \[(\d+)\]$"),
    "type": re.compile(r"^type \[(\d+)\] \[(.*?)\](?: \[([01])\])?$", re.DOTALL),
    "press": re.compile(rf"^press {_ARG}$"),
    "scroll": re.compile(r"^scroll \[(up|down)\]$"),
    "goto": re.compile(rf"^goto {_ARG}$"),
    "new_tab": re.compile(r"^new_tab$"),
    "go_back": re.compile(r"^go_back$"),
    "go_forward": re.compile(r"^go_forward$"),
    "tab_focus": re.compile(r"^tab_focus \[(\d+)\]$"),
    "close_tab": re.compile(r"^close_tab$"),
    "stop": re.compile(r"^stop(?: \[(.*)\])?$", re.DOTALL),
}
USAGE = (
    "valid commands: click [id], hover [id], type [id] [text] [0|1], press [keys], "
    "scroll [up|down], goto [url], new_tab, go_back, go_forward, tab_focus [n], close_tab, "
    "stop [answer]"
)


# `random_command`: a tree line's id, role and name (the name as Python's repr writes it)
_TREE_LINE = re.compile(r"""^\t*\[(\d+)\] (\S+)(?: ('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"))?""")
_WORD = re.compile(r"[^\W_]+")  # letters and digits: nothing that would end a command's [arg]
MAX_WORD = 24
# Roles a click does something on (clicks go to any shown element, these most of the time)
CLICKABLE = frozenset(
    {
        "link",
        "button",
        "textbox",
        "searchbox",
        "combobox",
        "checkbox",
        "radio",
        "switch",
        "menuitem",
        "menuitemcheckbox",
        "menuitemradio",
        "option",
        "tab",
        "treeitem",
        "slider",
        "spinbutton",
        "listbox",
    }
)
# Roles `type` writes a word into (not a combobox: on a <select> only an option's label goes)
TYPEABLE = frozenset({"textbox", "searchbox"})
# How often each kind of command is drawn (kinds with nothing to act on are left out)
RANDOM_WEIGHTS = {"click": 45, "hover": 8, "type": 22, "scroll": 12, "stop": 5, "go_back": 3}


def random_command(
    observation: str, objective: str, rng: random.Random, ids: Container[int] | None = None
) -> str:
    """A valid command drawn at random from what `observation` shows (its tree lines; `ids`, when
    given, the ids an action may address: others are passed over): `click [N]` (2 times in 3 on
    an element of a `CLICKABLE` role when one is shown) or `hover [N]` on a shown element,
    `type [N] [word] [1|0]` on a textbox, `scroll [down|up]`, rarely `stop [word]` and `go_back`,
    by `RANDOM_WEIGHTS`. Words are the page's names' and the objective's (letters and digits)."""
    elements: list[tuple[int, str]] = []
    names: list[str] = []
    for line in observation.splitlines():
        match = _TREE_LINE.match(line)
        if match is None or (ids is not None and int(match[1]) not in ids):
            continue
        if match[2] != "RootWebArea":  # its box is no element's: nothing there to click
            elements.append((int(match[1]), match[2]))
        if match[3]:
            try:
                names.append(str(ast.literal_eval(match[3])))
            except (ValueError, SyntaxError):
                pass
    words = list(
        dict.fromkeys(
            w for text in (*names, objective) for w in _WORD.findall(text) if len(w) <= MAX_WORD
        )
    )
    textboxes = [i for i, role in elements if role in TYPEABLE]
    kinds = {
        kind: weight
        for kind, weight in RANDOM_WEIGHTS.items()
        if (kind not in ("click", "hover") or elements)
        and (kind != "type" or bool(textboxes and words))
    }
    kind = rng.choices(list(kinds), list(kinds.values()))[0]
    if kind in ("click", "hover"):
        clickable = [i for i, role in elements if role in CLICKABLE]
        pool = clickable if clickable and rng.random() < 2 / 3 else [i for i, _ in elements]
        return f"{kind} [{rng.choice(pool)}]"
    if kind == "type":
        return f"type [{rng.choice(textboxes)}] [{rng.choice(words)}] [{rng.choice('10')}]"
    if kind == "scroll":
        return f"scroll [{rng.choice(('down', 'up'))}]"
    if kind == "stop":
        return f"stop [{rng.choice(words)}]" if words else "stop []"
    return "go_back"


class InvalidAction(Exception):
    """The command was not understood or names nothing on the page: nothing happened."""


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: tuple[str, ...]
    text: str  # the command as given (stripped)


_FENCED = re.compile(r"```(.*?)```", re.DOTALL)


def parse(text: str) -> Command:
    fenced = _FENCED.search(text)
    line = (fenced.group(1) if fenced else text).strip()
    name = line.split(" ", 1)[0] if line else ""
    pattern = _PATTERNS.get(name)
    if pattern is None:
        shown = line if len(line) <= 80 else line[:77] + "..."
        raise InvalidAction(f"unknown command {shown!r}; {USAGE}")
    match = pattern.match(line)
    if match is None:
        raise InvalidAction(f"malformed {name!r} command {line!r}; {USAGE}")
    return Command(name, tuple(g if g is not None else "" for g in match.groups()), line)


@dataclass(slots=True)
class Tabs:
    """An episode's pages and what its last observation showed."""

    context: BrowserContext
    current: Page
    settle_ms: float = 0.0
    book: IdBook = field(default_factory=IdBook)
    targets: dict[int, Target] = field(default_factory=dict)
    _cdp: dict[int, CDPSession] = field(default_factory=dict)
    _window_opens: int = 0  # CDP `Page.windowOpen` events: a popup is on its way
    _navigations: int = 0  # CDP `Page.frameRequestedNavigation`/`frameStartedLoading` events
    _loading: int = 0  # frames started loading and not stopped yet

    @property
    def pages(self) -> list[Page]:
        return list(self.context.pages)

    def observe(self) -> Tree:
        """Snapshot the current page (retrying once when a navigation replaced it meanwhile)."""
        for attempt in range(3):
            try:
                tree = snapshot(self.current, self._session(self.current), self.book)
                self.targets = tree.targets
                return tree
            except Exception:
                if attempt == 2:
                    raise
                self._cdp.pop(id(self.current), None)
                with contextlib.suppress(Exception):
                    self.current.wait_for_load_state("load")
        raise AssertionError("unreachable")

    def _session(self, page: Page) -> CDPSession:
        session = self._cdp.get(id(page))
        if session is None:
            session = self._cdp[id(page)] = self.context.new_cdp_session(page)
            session.on("Page.windowOpen", lambda _: self._count("_window_opens", 1))
            session.on("Page.frameRequestedNavigation", lambda _: self._count("_navigations", 1))
            session.on("Page.frameStartedLoading", lambda _: self._started())
            session.on("Page.frameStoppedLoading", lambda _: self._count("_loading", -1))
            session.send("Page.enable")
        return session

    def _count(self, name: str, delta: int) -> None:
        setattr(self, name, max(0, getattr(self, name) + delta))

    def _started(self) -> None:
        self._navigations += 1
        self._loading += 1

    # -- execution -----------------------------------------------------------------------------
    def execute(self, cmd: Command) -> None:
        before = set(map(id, self.context.pages))
        opens, navigations = self._window_opens, self._navigations
        page = self.current
        name, args = cmd.name, cmd.args
        if name == "type" and self._select(int(args[0]), args[1]):
            pass
        elif name in ("click", "hover", "type"):
            x, y = self._centre(int(args[0]))
            if name == "hover":
                page.mouse.move(x, y)
            else:
                page.mouse.click(x, y)
            if name == "type":
                page.keyboard.type(args[1])
                if args[2] != "0":
                    page.keyboard.press("Enter")
        elif name == "press":
            try:
                page.keyboard.press(args[0])
            except Exception as exc:
                if "Unknown key" in str(exc):
                    raise InvalidAction(f"unknown key in {args[0]!r}") from None
                raise
        elif name == "scroll":
            sign = "-" if args[0] == "up" else ""
            page.evaluate(f"window.scrollBy(0, {sign}window.innerHeight)")
        elif name == "goto":
            try:
                page.goto(args[0])
            except Exception as exc:
                if "Cannot navigate to invalid URL" in str(exc) or "invalid URL" in str(exc):
                    raise InvalidAction(f"invalid URL {args[0]!r}") from None
                raise
        elif name == "new_tab":
            self.current = self.context.new_page()
        elif name == "go_back":
            page.go_back()
        elif name == "go_forward":
            page.go_forward()
        elif name == "tab_focus":
            pages = self.pages
            n = int(args[0])
            if n >= len(pages):
                raise InvalidAction(f"no tab {n}: there are {len(pages)} tab(s)")
            self.current = pages[n]
            self.current.bring_to_front()
        elif name == "close_tab":
            page.close()
            pages = self.pages
            self.current = pages[-1] if pages else self.context.new_page()
            self.current.bring_to_front()
        self._settle(before, opens, navigations)

    def _select(self, ident: int, text: str) -> bool:
        """`type` on a `<select>`: choose the option with that label (or value), as its native
        pop-up is not part of the page. False when the element is no `<select>`."""
        target = self.targets.get(ident)
        if target is None or not target.element:
            return False
        element = self.current.locator(f"[{ID_ATTR}='{ident}']").first
        options = element.evaluate(
            "el => el.tagName === 'SELECT' ? [...el.options].map(o => [o.label, o.value]) : null"
        )
        if options is None:
            return False
        for label, value in options:
            if text.strip() in (label.strip(), value):
                element.select_option(value=value)
                return True
        shown = ", ".join(repr(label) for label, _ in options[:20])
        raise InvalidAction(f"[{ident}] has no option {text!r}; its options: {shown}")

    def _centre(self, ident: int) -> tuple[float, float]:
        target = self.targets.get(ident)
        if target is None:
            raise InvalidAction(
                f"no element with id [{ident}] on the page: use an id from the current observation"
            )
        if target.element:
            box = None
            with contextlib.suppress(Exception):
                box = self.current.locator(f"[{ID_ATTR}='{ident}']").first.bounding_box(
                    timeout=1000
                )
            if box is not None and box["width"] > 0 and box["height"] > 0:
                return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        return target.centre

    def _settle(self, before: set[int], opens: int, navigations: int) -> None:
        """Follow a tab the action opened; wait for a navigation it started and for `load`."""
        replaced = False
        try:  # a round trip after the page's pending tasks (a form submission is one)
            self.current.evaluate("() => new Promise(r => setTimeout(r, 0))")
        except Exception:
            replaced = True  # the document went away meanwhile: a navigation
        opened = [p for p in self.context.pages if id(p) not in before]
        if not opened and self._window_opens > opens:
            with contextlib.suppress(Exception):
                opened = [self.context.wait_for_event("page")]
        if opened:
            self.current = opened[-1]
        page = self.current
        if replaced or self._navigations > navigations:
            waited = 0.0
            while self._loading > 0 and waited < 10_000:
                page.wait_for_timeout(20)
                waited += 20
        with contextlib.suppress(Exception):
            page.wait_for_load_state("load")
        if self.settle_ms > 0:
            page.wait_for_timeout(self.settle_ms)
