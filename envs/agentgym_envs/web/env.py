"""The web envs: WebArena-format browsing on real Chromium, over two task sets.

`webarena` serves `WebArenaTaskSet` (our shop/forum sites, or self-hosted WebArena sites and
task files: its options), `miniwob` the MiniWoB++ task pages of the `miniwob` package. Both
share the browser core: one Chromium per server (`browser.py`), a fresh context per episode,
WebArena's observation (`observation.py`, layout documented there) and actions (`actions.py`).

Episode: `reset(data_idx)` leases a context, lets the task set prepare it, opens the task's
`start_url`, lets the task set start it, and returns the first observation. `step(command)`
parses the command (from the first block fenced in ``` when a whole reply is sent, as AgentGym's
WebArena server reads it; an unknown command or id: an observation with a `NOTE:` saying so,
`invalid=True`, nothing else changes), executes it, then asks `taskset.judge`; `stop [answer]`
ends the episode with the judge's final verdict, as does the judge saying done or the
`max_steps`-th action. `score` is the verdict's score, `reward` its change this step. When the
episode ends its context is closed; its last observation stays readable. `random_action` draws a
concrete command from the current observation (`actions.random_command`).

A browser that died fails each of its live episodes' next call with `internal` (the message
says so); new episodes (and a reset of the failed one) get a fresh browser. The env is
`blocking`: every call runs on the server's one env worker thread, where Playwright lives.

Options (strings, `--env-option KEY=VALUE`), common to both: `chromium` (path; default
`chromium` on PATH), `recycle` (contexts per browser before it is replaced, default 200),
`action_timeout_s` (Playwright's timeout per action, default 10), `max_obs_chars` (tree cap,
default 12000), `max_steps` (actions per episode, default 30), `settle_ms` (extra wait after
each action, default 0). `miniwob` adds `step_ms` (see `miniwob.py`); `webarena` passes its
other options to `WebArenaTaskSet.from_options`.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import random
import shutil
from typing import Any, ClassVar

from agentgym_envs.server.base import (
    EnvError,
    Environment,
    EnvUnavailable,
    Episode,
    ErrorCode,
    StepResult,
)
from agentgym_envs.server.env_options import float_option, int_option
from agentgym_envs.server.tools import Tool
from agentgym_envs.web.actions import USAGE, Command, InvalidAction, Tabs, parse, random_command
from agentgym_envs.web.browser import BrowserPool, Lease
from agentgym_envs.web.miniwob import SPLITS as MINIWOB_SPLITS  # no browser or package import
from agentgym_envs.web.observation import render, tabs_line
from agentgym_envs.web.taskset import TaskSet, Verdict, WebTask
from agentgym_envs.web.tools import WEB_TOOLS

log = logging.getLogger("agentgym_envs.web")

NO_CHROMIUM = (
    "the web env needs Chromium and none was found (option chromium=PATH, or `chromium` on "
    "PATH): as root run 'apt-get install -y --no-install-recommends chromium' (Debian's "
    "`chromium` package; scripts/install.sh does this when run as root)"
)
ACTIONS = [part.strip() for part in USAGE.split(":", 1)[1].split(", ")]
_sessions = itertools.count(1)


class WebEpisode(Episode):
    """One browsing episode (see the module docs)."""

    def __init__(self, env: WebEnvironment) -> None:
        self._env = env
        self._lease: Lease | None = None
        self._tabs: Tabs | None = None
        self.task: WebTask | None = None
        self._objective = ""
        self._previous: str | None = None
        self._last = ""
        self._tree = ""
        self._score = 0.0
        self._steps = 0
        self._broken: str | None = None

    def reset(self, data_idx: int) -> StepResult:
        self._release()
        self._broken = None
        self._tabs = None  # until this reset succeeds
        env = self._env
        task = env.taskset.task(data_idx)
        self.task, self._previous, self._score, self._steps = task, None, 0.0, 0
        self._lease = env.pool.lease()
        context = self._lease.context
        self._guard(
            lambda: env.taskset.prepare(task, context, f"ep{os.getpid()}-{next(_sessions)}")
        )
        page = self._guard(context.new_page)
        self._guard(lambda: page.goto(task.start_url))
        objective = self._guard(lambda: env.taskset.start(task, page))
        self._objective = objective if objective else task.intent
        self._tabs = Tabs(context, page, settle_ms=env.settle_ms)
        return StepResult(self._observe())

    def step(self, action: str) -> StepResult:
        self._check()
        if self._tabs is None or self.task is None:
            raise EnvError(ErrorCode.NOT_RESET, "the episode has not been reset")
        try:
            cmd = parse(action)
            if (
                cmd.name in ("click", "hover", "type")
                and int(cmd.args[0]) not in self._tabs.targets
            ):
                raise InvalidAction(
                    f"no element with id [{cmd.args[0]}] in the current observation: use an id "
                    "shown there"
                )
        except InvalidAction as exc:
            return StepResult(self._render(f"invalid action: {exc}"), 0.0, self._score, False, True)
        self._steps += 1
        previous, self._previous = self._previous, cmd.text
        note: str | None = None
        if cmd.name != "stop":
            try:
                self._guard(lambda: self._tabs.execute(cmd))  # type: ignore[union-attr]
            except InvalidAction as exc:
                self._steps -= 1
                self._previous = previous
                return StepResult(
                    self._render(f"invalid action: {exc}"), 0.0, self._score, False, True
                )
            except _ActionFailed as exc:
                note = f"the action failed: {exc}"
        verdict = self._judge(cmd)
        reward, self._score = verdict.score - self._score, verdict.score
        done = verdict.done or cmd.name == "stop" or self._steps >= self._env.max_steps
        if done:
            ending = verdict.note or ("the step limit was reached" if not verdict.done else None)
            note = "; ".join(n for n in (note, "the episode is over", ending) if n)
        obs = self._observe(note)
        if done:
            self._release()
        return StepResult(obs, reward, self._score, done, False)

    def observation(self) -> str:
        self._check()
        return self._last

    def available_actions(self) -> list[str]:
        self._check()
        return list(ACTIONS)

    def random_action(self, rng: random.Random) -> str | None:
        """A concrete command on what the current observation shows (`random_command`: an id
        it shows that the page still has, a word of the page or the objective); None before a
        reset and once the episode is over."""
        if self._tabs is None or self._lease is None or self._broken is not None:
            return None
        return random_command(self._last, self._objective, rng, self._tabs.targets)

    def close(self) -> None:
        self._release()

    # -- internals -------------------------------------------------------------------------------
    def _judge(self, cmd: Command) -> Verdict:
        assert self.task is not None and self._tabs is not None
        answer = cmd.args[0] if cmd.name == "stop" else None
        page = self._tabs.current
        return self._guard(lambda: self._env.taskset.judge(self.task, page, answer))  # type: ignore[arg-type]

    def _observe(self, note: str | None = None) -> str:
        assert self._tabs is not None
        tabs = self._tabs
        self._tree = self._env.taskset.shown(self._guard(lambda: tabs.observe().text))
        return self._render(note)

    def _render(self, note: str | None) -> str:
        assert self._tabs is not None
        tabs = self._tabs
        self._last = render(
            self._guard(lambda: tabs_line(tabs.pages, tabs.current)),
            self._tree,
            self._env.taskset.shown(tabs.current.url),
            self._objective,
            self._previous,
            self._env.max_obs_chars,
            note,
        )
        return self._last

    def _guard(self, fn: Any) -> Any:
        """Run a browser call; a dead browser fails the episode, a Playwright error (timeout,
        closed target) in an action is reported as the action's failure."""
        try:
            return fn()
        except (InvalidAction, EnvError):
            raise
        except Exception as exc:
            if self._lease is not None and self._lease.broken:
                self._fail(exc)
            from playwright.sync_api import Error as PlaywrightError

            if isinstance(exc, PlaywrightError):
                raise _ActionFailed(str(exc).splitlines()[0]) from exc
            raise

    def _fail(self, exc: BaseException) -> None:
        pid = self._lease.owner.pid if self._lease is not None else None
        self._broken = (
            f"the browser of this episode (chromium pid {pid}) died; a fresh one serves new "
            f"episodes: start a new episode ({type(exc).__name__})"
        )
        self._release()
        raise EnvError(ErrorCode.INTERNAL, self._broken) from None

    def _check(self) -> None:
        if self._broken is not None:
            raise EnvError(ErrorCode.INTERNAL, self._broken)
        if self._lease is not None and self._lease.broken:
            self._fail(RuntimeError("browser gone"))

    def _release(self) -> None:
        if self._lease is not None:
            self._lease.close()
            self._lease = None


class _ActionFailed(Exception):
    """A valid action the browser could not complete (a timeout, a closed page)."""


class WebEnvironment(Environment):
    """The browser core over one task set (see the module docs)."""

    blocking: ClassVar[bool] = True  # Playwright's sync API lives on the env's worker thread
    # AgentGym's WebArena server's HTTP shape (server/http.py), for miniwob too: one web env class,
    # one wire, so AgentGym's WebArena client drives either
    http_dialect: ClassVar[str] = "webarena"
    action_format: ClassVar[str] = "webarena"  # its prompt: the generic one of that format
    tools: ClassVar[tuple[Tool, ...]] = WEB_TOOLS
    needs: ClassVar[dict[str, str]] = {
        "chromium": "install Chromium (as root: `apt-get install chromium`; scripts/install.sh does)"
    }

    def __init__(self, taskset_factory: Any, options: dict[str, str]) -> None:
        opts = dict(options)
        name = self.name
        chromium = opts.pop("chromium", None) or shutil.which("chromium")
        if not chromium or not os.path.exists(chromium):
            raise EnvUnavailable(NO_CHROMIUM)
        recycle = int_option(name, "recycle", opts.pop("recycle", 200), 1)
        timeout = float_option(name, "action_timeout_s", opts.pop("action_timeout_s", 10), 0.1)
        self.max_obs_chars = int_option(
            name, "max_obs_chars", opts.pop("max_obs_chars", 12000), 200
        )
        self.max_steps = int_option(name, "max_steps", opts.pop("max_steps", 30), 1)
        self.settle_ms = float_option(name, "settle_ms", opts.pop("settle_ms", 0), 0.0)
        self.taskset: TaskSet = taskset_factory(opts)
        self.pool = BrowserPool(chromium, recycle, timeout)
        atexit.register(self.close)  # no chromium outlives the server

    def new_episode(self) -> WebEpisode:
        return WebEpisode(self)

    def num_tasks(self) -> int | None:
        return len(self.taskset)

    def close(self) -> None:
        """End every browser (by pid when called off the worker thread) and the task set."""
        self.pool.close()
        try:
            self.taskset.close()
        except Exception:
            log.exception("closing the task set raised")

    def info(self) -> dict[str, Any]:
        return {
            **super().info(),
            "taskset": self.taskset.name,
            "max_steps": self.max_steps,
            **self.pool.stats(),
        }


def _webarena_taskset(options: dict[str, str]) -> TaskSet:
    from agentgym_envs.web.webarena import WebArenaTaskSet

    return WebArenaTaskSet.from_options(options)


def _miniwob_taskset(options: dict[str, str]) -> TaskSet:
    from agentgym_envs.web.miniwob import MiniWoBTaskSet

    return MiniWoBTaskSet.from_options(options)


class WebArenaEnvironment(WebEnvironment):
    name: ClassVar[str] = "webarena"
    description: ClassVar[str] = (
        "Web navigation on real Chromium in WebArena's format (accessibility tree, click/type/"
        "stop commands) over sites served here or self-hosted WebArena sites"
    )
    splits: ClassVar[dict[str, str | range]] = {
        "train": "data/webarena_train.json",
        "test": "data/webarena_test.json",
    }

    def __init__(self, **options: str) -> None:
        super().__init__(_webarena_taskset, options)


class MiniWoBEnvironment(WebEnvironment):
    name: ClassVar[str] = "miniwob"
    description: ClassVar[str] = (
        "MiniWoB++ task pages (miniwob package) on real Chromium, WebArena's observation and "
        "actions, scored by the task's own reward"
    )
    # the files `miniwob.write_splits` writes, one per entry of its SPLITS
    splits: ClassVar[dict[str, str | range]] = {
        name: f"data/miniwob_{name}.json" for name in MINIWOB_SPLITS
    }

    def __init__(self, **options: str) -> None:
        super().__init__(_miniwob_taskset, options)
