"""The web env's browser: one Chromium process per server, a fresh browser context per episode.

Contract:
- `BrowserPool.lease()` hands out a `Lease` (a new `BrowserContext`, 1280x720, with the
  per-action timeout set) on the current browser, launching it first when there is none. The
  browser is started lazily, on the thread that first asks: Playwright's sync API binds its
  objects to that thread, and the env is `blocking`, so that is the server's one env worker.
- `Lease.close()` closes the context. After `recycle` contexts a browser retires: new leases
  go to a fresh browser, the old one is closed when its last lease is closed.
- A browser that died (crashed, killed) is noticed through `alive()` (Playwright's
  `is_connected()` and the process itself); its leases are `broken` (their episodes then fail
  with `internal`) and the next lease launches a new browser.
- `close()` ends every browser. Called from another thread than the owner (the server's
  shutdown runs on its main thread), it kills the processes by pid (each Chromium's process
  group, then the Playwright driver), since Playwright objects cannot be used there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Playwright

log = logging.getLogger("agentgym_envs.web")


# -- processes, read from /proc (Linux) --------------------------------------------------------
def _stat(pid: int) -> tuple[str, str, int] | None:
    """(name, state, parent pid) of `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            raw = f.read()
    except OSError:
        return None
    name = raw[raw.index("(") + 1 : raw.rindex(")")]
    state, ppid = raw[raw.rindex(")") + 2 :].split()[:2]
    return name, state, int(ppid)


def children(pid: int, recursive: bool = False) -> list[int]:
    """Child pids of `pid` (and theirs, when `recursive`)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                parents.setdefault(st[2], []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        out.extend(kids)
        if recursive:
            todo.extend(kids)
    return out


def process_alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[1] not in ("Z", "X")


VIEWPORT = {"width": 1280, "height": 720}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
    "--mute-audio",
    "--allow-file-access-from-files",
]


@dataclass(slots=True, eq=False)
class _Browser:
    browser: Browser
    pid: int | None
    generation: int
    contexts: int = 0  # contexts ever created on it
    live: set[Lease] = field(default_factory=set)
    retiring: bool = False
    dead: bool = False


@dataclass(slots=True, eq=False)
class Lease:
    """One episode's browser context on one browser generation."""

    pool: BrowserPool
    owner: _Browser
    context: BrowserContext
    closed: bool = False

    @property
    def broken(self) -> bool:
        """Whether the browser under this context died."""
        return self.owner.dead or not self.pool.alive(self.owner)

    def close(self) -> None:
        self.pool.release(self)


class BrowserPool:
    """Chromium processes driven by Playwright's sync API (see the module docs)."""

    def __init__(self, executable: str, recycle: int, action_timeout_s: float) -> None:
        self.executable = executable
        self.recycle = recycle
        self.action_timeout_ms = action_timeout_s * 1000.0
        self._pw: Playwright | None = None
        self._owner: int | None = None  # thread ident that owns the Playwright objects
        self._driver: int | None = None  # pid of Playwright's driver process
        self._current: _Browser | None = None
        self._browsers: list[_Browser] = []
        self._generation = 0
        self.launched_total = 0
        self.crashed_total = 0

    # -- leases ------------------------------------------------------------------------------
    def lease(self) -> Lease:
        """A fresh context on a live browser (launching one when needed)."""
        current = self._current
        if current is not None and not self.alive(current):
            self._mark_dead(current)
            current = None
        if current is None or current.retiring:
            current = self._launch()
        context = current.browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        context.set_default_timeout(self.action_timeout_ms)
        context.set_default_navigation_timeout(self.action_timeout_ms)
        current.contexts += 1
        if current.contexts >= self.recycle:
            current.retiring = True
        lease = Lease(self, current, context)
        current.live.add(lease)
        return lease

    def release(self, lease: Lease) -> None:
        if lease.closed:
            return
        lease.closed = True
        owner = lease.owner
        owner.live.discard(lease)
        if owner.dead or not self._on_owner_thread():
            return
        try:
            lease.context.close()
        except Exception as exc:  # the browser went away meanwhile
            log.debug("closing a context failed: %s", exc)
        if owner.retiring and not owner.live:
            self._close_browser(owner)

    def alive(self, b: _Browser) -> bool:
        if b.dead:
            return False
        if b.pid is not None and not process_alive(b.pid):
            return False
        if self._driver is not None and not process_alive(self._driver):
            return False  # Playwright's driver died: nothing it drove can be used
        try:
            return bool(b.browser.is_connected())
        except Exception:
            return False

    # -- facts for info/tests ------------------------------------------------------------------
    @property
    def browser_pid(self) -> int | None:
        """Pid of the Chromium main process new episodes go to (None before the first)."""
        return None if self._current is None else self._current.pid

    def pids(self) -> list[int]:
        """Every Chromium process this pool started (main processes and their children)."""
        out: list[int] = []
        for b in self._browsers:
            if b.pid is not None and process_alive(b.pid):
                out.append(b.pid)
                out.extend(children(b.pid, recursive=True))
        return out

    def stats(self) -> dict[str, Any]:
        return {
            "browser_pid": self.browser_pid,
            "browsers_launched": self.launched_total,
            "browsers_crashed": self.crashed_total,
            "live_contexts": sum(len(b.live) for b in self._browsers),
        }

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        """End every browser and the Playwright driver (idempotent, any thread)."""
        graceful = self._on_owner_thread()
        for b in list(self._browsers):
            if graceful and not b.dead:
                self._close_browser(b)
            else:
                self._kill(b)
        self._browsers.clear()
        self._current = None
        if self._pw is not None:
            if graceful:
                with contextlib.suppress(Exception):
                    self._pw.stop()
            else:
                self._kill_driver()
            self._pw = None

    def _on_owner_thread(self) -> bool:
        return self._owner is None or self._owner == threading.get_ident()

    def _launch(self) -> _Browser:
        if self._pw is not None and self._driver is not None and not process_alive(self._driver):
            log.error("Playwright's driver (pid %d) died: starting a new one", self._driver)
            self._kill_driver()
            with contextlib.suppress(Exception):
                self._pw.stop()
            self._pw = None
        if self._pw is None:
            from playwright.sync_api import sync_playwright

            before = set(children(os.getpid()))
            self._pw = sync_playwright().start()
            self._owner = threading.get_ident()
            started = [p for p in children(os.getpid()) if p not in before]
            self._driver = started[0] if started else None
        before = set(self._driver_children())
        browser = self._pw.chromium.launch(
            executable_path=self.executable, headless=True, args=CHROMIUM_ARGS
        )
        new = [p for p in self._driver_children() if p not in before]
        self._generation += 1
        b = _Browser(browser, new[0] if new else None, self._generation)
        self._browsers.append(b)
        self._current = b
        self.launched_total += 1
        log.info("launched chromium pid %s (generation %d)", b.pid, b.generation)
        return b

    def _driver_children(self) -> list[int]:
        """Direct children of the Playwright driver: the Chromium main processes."""
        out: list[int] = []
        for pid in children(self._driver) if self._driver is not None else []:
            st = _stat(pid)
            if st is not None and "chrom" in st[0].lower():
                out.append(pid)
        return out

    def _mark_dead(self, b: _Browser) -> None:
        if b.dead:
            return
        b.dead = True
        self.crashed_total += 1
        log.error("chromium pid %s died: its %d live episode(s) fail", b.pid, len(b.live))
        self._kill(b)  # whatever is left of it
        if self._current is b:
            self._current = None

    def _close_browser(self, b: _Browser) -> None:
        try:
            b.browser.close()
        except Exception as exc:
            log.debug("closing chromium failed: %s", exc)
        self._kill(b)
        b.dead = True
        if b in self._browsers:
            self._browsers.remove(b)
        if self._current is b:
            self._current = None

    def _kill(self, b: _Browser) -> None:
        if b.pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(b.pid, signal.SIGKILL)  # Playwright starts Chromium as a group leader
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(b.pid, signal.SIGKILL)

    def _kill_driver(self) -> None:
        if self._driver is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self._driver, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(self._driver, 0)
        self._driver = None
