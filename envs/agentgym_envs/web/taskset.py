"""The contract between the web env's browser core (`env.py`, `browser.py`, `observation.py`,
`actions.py`) and the task sets it serves (`webarena.py` with the sites in `sites/`, and
`miniwob.py`).

A `TaskSet` owns everything task-specific: how many tasks there are, what each asks (the
objective shown to the agent), where it starts, how an episode's browser context is prepared
(cookies naming the episode's session on our own sites, a MiniWoB task started by script) and
how the page is scored. The core owns the browser, the observation, the actions and the
episode's life; it never looks inside a task's evaluation.

Thread rule: every method taking a Playwright object is called on the env's worker thread (the
env is `blocking`), the only thread that touches the browser.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page


@dataclass(frozen=True, slots=True)
class WebTask:
    """One task as the agent and the splits see it."""

    index: int
    """`data_idx` of the task (its position in the set)."""
    intent: str
    """The objective shown in every observation."""
    start_url: str
    """Absolute URL the episode's first page loads (placeholders already mapped)."""
    category: str
    """Split category, e.g. `shop/info`, `forum/nav`, `miniwob/click-button`."""
    scored: bool = True
    """False when nothing can score it here (a `fuzzy_match` task without a judge endpoint): it
    is served, but left out of training splits."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Task-set specific data (the WebArena config, the MiniWoB task name, ...)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """How the episode stands after an action: its score so far and whether it is over."""

    score: float
    done: bool
    note: str | None = None
    """A line for the observation when the episode ends (e.g. which evaluator failed)."""


class TaskSet(ABC):
    """Tasks of one kind, served by the web env."""

    name: str

    @abstractmethod
    def __len__(self) -> int:
        """Number of tasks (`data_idx` in `[0, len)`)."""

    @abstractmethod
    def task(self, index: int) -> WebTask:
        """Task `index` (0 <= index < len)."""

    def prepare(self, task: WebTask, context: BrowserContext, session: str) -> None:  # noqa: B027
        """Called once per episode on its fresh browser context before the first page loads
        (e.g. a session cookie so that per-episode site state is the episode's own)."""

    def start(self, task: WebTask, page: Page) -> str | None:
        """Called after `start_url` loaded (MiniWoB: start the task's episode by script).
        Returns the objective when only the page knows it (MiniWoB's utterance, drawn from the
        seed), else None: the observation then shows `task.intent`."""
        return None

    def shown(self, text: str) -> str:
        """A page's URL or accessibility tree as the observation shows it (MiniWoB: without the
        folder the package is installed in, which would tie a policy's inputs to one machine)."""
        return text

    @abstractmethod
    def judge(self, task: WebTask, page: Page, answer: str | None) -> Verdict:
        """After every executed action: `answer` is the text of `stop [answer]` when the agent
        stopped (then the verdict must be final), else None (MiniWoB ends on its own; WebArena
        tasks return `Verdict(0.0, False)` until the agent stops)."""

    def close(self) -> None:  # noqa: B027
        """Release what the set holds (site servers); called once at env close."""
