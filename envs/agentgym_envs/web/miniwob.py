"""MiniWoB++ through the web env: the task pages the `miniwob` package (1.1.0) ships, served to
the env's Chromium as `file://` URLs (its core JS needs no server for these tasks).

Tasks: `TASKS`, the MiniWoB++ tasks that need only clicks, typing and keys (no canvas, SVG
shapes or dragging). `data_idx = seed * len(TASKS) + k` names task `TASKS[k]` with seed `seed`
(`SEEDS` seeds per task); the category is the task's name.

Start: the page loads, then `Math.seedrandom(seed)` and `core.startEpisodeReal()` (what the
package's own driver does), waiting for `WOB_TASK_READY`. The objective is the task's
utterance (`core.getUtterance()`). The reward display and click canvas are hidden.

Time: MiniWoB ends an episode after `core.EPISODE_MAX_TIME` of wall-clock time (-1, "timed
out") and discounts the reward by the time taken. A language model thinks for seconds per
turn, so the wall clock is replaced by a step clock: the page's timer is cleared, and each
executed action counts `step_ms` (option, default 500) of the task's time. An action that ends
the episode after k earlier actions gets reward x max(0, 1 - k * step_ms / EPISODE_MAX_TIME)
(so a one-click solve scores exactly 1.0); once the step clock reaches the task's limit the
episode ends as MiniWoB's timer would (raw reward -1, "timed out"). Deterministic: the score
depends on the actions, never on the model's speed.

URLs: the observation shows a task page's path inside the package's html folder
(`miniwob/click-tab.html`, links `miniwob/click-tab.html#tabs-1`), not where the package is
installed.

Score: the time-discounted reward (`WOB_REWARD_GLOBAL`, in [-1, 1]); success is reward > 0,
which is the rollout side's default rule (score > 0). `stop [...]` before the page ended the
episode scores 0 (MiniWoB has no answer to give).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agentgym_envs.server.env_options import int_option
from agentgym_envs.web.taskset import TaskSet, Verdict, WebTask

if TYPE_CHECKING:
    from playwright.sync_api import Page

TASKS: tuple[str, ...] = (
    "click-button",
    "click-button-sequence",
    "click-checkboxes",
    "click-checkboxes-large",
    "click-checkboxes-soft",
    "click-checkboxes-transfer",
    "click-collapsible",
    "click-collapsible-2",
    "click-collapsible-nodelay",
    "click-collapsible-2-nodelay",
    "click-dialog",
    "click-dialog-2",
    "click-link",
    "click-menu",
    "click-option",
    "click-tab",
    "click-tab-2",
    "click-tab-2-easy",
    "click-tab-2-medium",
    "click-tab-2-hard",
    "click-test",
    "click-test-2",
    "click-widget",
    "enter-password",
    "enter-text",
    "enter-text-2",
    "enter-text-dynamic",
    "find-word",
    "focus-text",
    "focus-text-2",
    "form-sequence-2",
    "form-sequence-3",
    "guess-number",
    "login-user",
    "login-user-popup",
    "multi-layouts",
    "multi-orderings",
    "navigate-tree",
    "odd-or-even",
    "read-table",
    "read-table-2",
    "search-engine",
    "simple-algebra",
    "simple-arithmetic",
    "social-media",
    "social-media-all",
    "social-media-some",
    "email-inbox",
    "email-inbox-delete",
    "email-inbox-forward-nl",
    "email-inbox-important",
    "email-inbox-noscroll",
    "email-inbox-reply",
    "email-inbox-star-reply",
    "terminal",
    "text-transform",
    "unicode-test",
    "use-autocomplete-nodelay",
)
SEEDS = 1000
TEST_SEEDS = range(0, 3)  # miniwob_test.json: 3 seeds per task
TRAIN_SEEDS = range(3, 43)  # miniwob_train.json: 40 seeds per task
# The simplest click tasks that ask for a choice: one click solves each, on the one element of
# several that the utterance names (a button by its label, a dialog's button, a tab by its
# number, a widget by its kind); the small-policy recipe, configs/train/miniwob_click.yaml.
# Left out, also one click: click-test, click-test-2 and click-dialog, whose page shows one or
# two buttons (a format-only policy solves them greedily), and click-link, whose target the tree
# never shows (WebArena's pruning drops a text the 3 lines above show, and the utterance line
# names the link). Their own seed ranges, disjoint.
CLICK_TASKS: tuple[str, ...] = ("click-button", "click-dialog-2", "click-tab", "click-widget")
CLICK_TEST_SEEDS = range(900, 925)  # miniwob_click_test.json: 25 seeds per task
CLICK_TRAIN_SEEDS = range(100, 900)  # miniwob_click_train.json: 800 seeds per task

_START = """async ([seed, stepMs]) => {
  Math.seedrandom(seed);
  core.startEpisodeReal();
  for (let i = 0; i < 200 && !WOB_TASK_READY; i++) await new Promise(r => setTimeout(r, 25));
  if (core.EP_TIMER !== null) { clearTimeout(core.EP_TIMER); core.EP_TIMER = 'step-clock'; }
  core.clearTimer();
  window.__agSteps = 0;
  window.__agStepMs = stepMs;
  const end = core.endEpisode;
  core.endEpisode = function (reward, timeProportional, reason) {
    // the clock stands still while the episode ends: the time it reads is the step clock's
    // (reading it twice could straddle a millisecond and discount a one-action win to 0.9999)
    const now = Date.now(), getTime = Date.prototype.getTime;
    Date.prototype.getTime = function () { return now; };
    try {
      core.ept0 = now - window.__agSteps * window.__agStepMs;
      return end.call(this, reward, timeProportional, reason);
    } finally {
      Date.prototype.getTime = getTime;
    }
  };
  for (const id of ['reward-display', 'click-canvas']) {
    const el = document.getElementById(id);
    if (el) el.style.display = 'none';
  }
  return core.getUtterance();
}"""
_AFTER_ACTION = """() => {
  if (typeof WOB_DONE_GLOBAL === 'undefined' || window.__agSteps === undefined) {
    return null;  // not the task's page any more (goto, go_back, a closed tab)
  }
  window.__agSteps += 1;
  if (!WOB_DONE_GLOBAL && window.__agSteps * window.__agStepMs >= core.EPISODE_MAX_TIME) {
    core.endEpisode(-1, false, 'timed out');
  }
  const reason = WOB_REWARD_REASON == null ? '' : ', ' + String(WOB_REWARD_REASON);
  return [WOB_DONE_GLOBAL, WOB_REWARD_GLOBAL, WOB_RAW_REWARD_GLOBAL, reason];
}"""


def html_dir() -> str:
    """The package's task pages folder."""
    import miniwob

    return os.path.join(os.path.dirname(miniwob.__file__), "html")


class MiniWoBTaskSet(TaskSet):
    """MiniWoB++ tasks x seeds (see the module docs)."""

    name = "miniwob"

    def __init__(self, step_ms: int = 500) -> None:
        self.step_ms = step_ms
        self.root = html_dir()
        self._installed = "file://" + self.root + os.sep  # what `shown` drops
        missing = [t for t in TASKS if not os.path.exists(self._path(t))]
        if missing:
            raise ValueError(f"miniwob package lacks task pages {missing} under {self.root}")

    @classmethod
    def from_options(cls, options: dict[str, str]) -> MiniWoBTaskSet:
        opts = dict(options)
        raw = opts.pop("step_ms", "500")
        if opts:
            raise ValueError(f"miniwob: unknown option(s) {sorted(opts)}; known: step_ms")
        return cls(int_option("miniwob", "step_ms", raw, 0))

    def _path(self, task: str) -> str:
        return os.path.join(self.root, "miniwob", f"{task}.html")

    def __len__(self) -> int:
        return len(TASKS) * SEEDS

    def task(self, index: int) -> WebTask:
        if not 0 <= index < len(self):
            raise IndexError(f"miniwob task {index} out of range [0, {len(self)})")
        seed, k = divmod(index, len(TASKS))
        name = TASKS[k]
        return WebTask(
            index=index,
            intent=f"MiniWoB++ task {name} (its instruction is on the page)",
            start_url="file://" + self._path(name),
            category=name,
            meta={"task": name, "seed": seed},
        )

    def start(self, task: WebTask, page: Page) -> str | None:
        page.wait_for_function("typeof core !== 'undefined' && typeof genProblem === 'function'")
        utterance: Any = page.evaluate(_START, [task.meta["seed"], self.step_ms])
        if isinstance(utterance, dict):  # the natural-language tasks return their fields too
            utterance = utterance.get("utterance")
        return str(utterance) if utterance else None

    def shown(self, text: str) -> str:
        return text.replace(self._installed, "")  # miniwob/click-test.html

    def judge(self, task: WebTask, page: Page, answer: str | None) -> Verdict:
        state = page.evaluate(_AFTER_ACTION)
        if state is None:  # the episode's task page is gone: it can only fail now
            return Verdict(-1.0, True, "left the task's page: reward -1")
        done, reward, raw, reason = state
        if done:
            note = f"MiniWoB reward {float(reward):.3f} (raw {raw}{reason})"
            return Verdict(float(reward), True, note)
        if answer is not None:
            return Verdict(0.0, True, "stopped before the task ended: reward 0")
        return Verdict(0.0, False)


def item_index(task: str, seed: int) -> int:
    """`data_idx` of `task` with `seed`."""
    return seed * len(TASKS) + TASKS.index(task)


def split_items(seeds: range, tasks: tuple[str, ...] = TASKS) -> list[dict[str, str]]:
    """`{"item_id": "miniwob_<data_idx>", "category": task}` for every seed x task, seed-major
    (so the first rows of a split cover every task)."""
    return [{"item_id": f"miniwob_{item_index(t, s)}", "category": t} for s in seeds for t in tasks]


SPLITS: dict[str, tuple[range, tuple[str, ...]]] = {
    "train": (TRAIN_SEEDS, TASKS),
    "test": (TEST_SEEDS, TASKS),
    "click_train": (CLICK_TRAIN_SEEDS, CLICK_TASKS),
    "click_test": (CLICK_TEST_SEEDS, CLICK_TASKS),
}


def write_splits(folder: str) -> None:
    """Write `miniwob_<split>.json` of every `SPLITS` entry (one item a line) into `folder`."""
    import json

    for name, (seeds, tasks) in SPLITS.items():
        items = split_items(seeds, tasks)
        lines = ",\n".join(json.dumps(item) for item in items)
        with open(os.path.join(folder, f"miniwob_{name}.json"), "w") as f:
            f.write(f"[\n{lines}\n]\n")


if __name__ == "__main__":  # python -m agentgym_envs.web.miniwob: rewrite the split files
    write_splits(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
