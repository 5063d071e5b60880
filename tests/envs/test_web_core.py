"""The web env's browser core on fixed pages of our own (a tiny task set in this file, pages served
by a local http.server thread): the pinned tree text, stable ids, the actions, invalid actions,
the observation layout and cap, a killed browser, browser recycling, no Chromium left behind.

One env (one Chromium) is shared by the module; the crash and recycle tests start their own.
"""

from __future__ import annotations

import functools
import http.server
import os
import random
import re
import shutil
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("playwright")
if shutil.which("chromium") is None:
    pytest.skip("Debian's chromium is not installed", allow_module_level=True)

from tests.envs.conftest import processes_gone

from agentgym_envs.server.base import EnvError, ErrorCode
from agentgym_envs.web.browser import process_alive
from agentgym_envs.web.env import WebEnvironment
from agentgym_envs.web.observation import render
from agentgym_envs.web.taskset import TaskSet, Verdict, WebTask

pytestmark = pytest.mark.process

PAGES = {
    "form.html": """<!DOCTYPE html><html><head><title>Sign in</title></head><body>
<h1>Sign in</h1>
<form action="done.html">
<label for="user">User name</label> <input id="user" name="user">
<label>Password <input type="password" name="pw"></label>
<input type="checkbox" id="keep"><label for="keep">Keep me signed in</label>
<button type="submit">Log in</button>
</form></body></html>""",
    "links.html": """<!DOCTYPE html><html><head><title>Links</title></head><body>
<nav><ul><li><a href="form.html">Form</a></li><li><a href="repeat.html">Repeat</a></li>
<li><a href="done.html" target="_blank">Done in a new tab</a></li></ul></nav>
<p>Pick a page.</p></body></html>""",
    "repeat.html": """<!DOCTYPE html><html><head><title>Repeat</title></head><body>
<h2>Total: 42</h2><p>Total: 42</p>
<div style="display:none"><button>Hidden</button></div>
<div style="visibility:hidden"><a href="#">Invisible</a></div>
<button aria-label="Zero" style="width:0;height:0;padding:0;border:0"></button>
<p id="grow">Item one</p>
<div style="margin-top:1000px"><button id="far">Far below</button></div>
</body></html>""",
    "select.html": """<!DOCTYPE html><html><head><title>Pick</title></head><body>
<label for="size">Size</label><select id="size"><option value="s">Small</option>
<option value="l">Large</option></select></body></html>""",
    "done.html": """<!DOCTYPE html><html><head><title>Done</title></head><body>
<p>All done.</p></body></html>""",
}

FORM_TREE = """[{root}] RootWebArea 'Sign in' focused: True
\t[5] heading 'Sign in'
\t[{t1}] StaticText 'User name'
\t[8] textbox 'User name' required: False
\t[{t2}] StaticText 'Password '
\t[10] textbox 'Password ' required: False
\t[11] checkbox 'Keep me signed in' checked: false
\t[13] button 'Log in'"""
LINKS_TREE = """[{root}] RootWebArea 'Links' focused: True
\t[{m1}] ListMarker '• '
\t[8] link 'Form' url: {base}/form.html
\t[{m2}] ListMarker '• '
\t[10] link 'Repeat' url: {base}/repeat.html
\t[{m3}] ListMarker '• '
\t[12] link 'Done in a new tab' url: {base}/done.html
\t[{t1}] StaticText 'Pick a page.'"""
REPEAT_TREE = """[{root}] RootWebArea 'Repeat' focused: True
\t[5] heading 'Total: 42'
\t[{t1}] StaticText 'Item one'"""


class PagesTaskSet(TaskSet):
    """Task i starts on page i; `stop [yes]` scores 1, anything else 0."""

    name = "pages"
    FILES = ("form.html", "links.html", "repeat.html", "select.html")

    def __init__(self, base: str) -> None:
        self.base = base

    def __len__(self) -> int:
        return len(self.FILES)

    def task(self, index: int) -> WebTask:
        return WebTask(index, f"open {self.FILES[index]}", f"{self.base}/{self.FILES[index]}", "p")

    def judge(self, task: WebTask, page: Any, answer: str | None) -> Verdict:
        if answer is None:
            return Verdict(0.0, False)
        return Verdict(1.0 if answer == "yes" else 0.0, True, "judged")


class PagesEnv(WebEnvironment):
    name: ClassVar[str] = "pages"

    def __init__(self, base: str, **options: str) -> None:
        super().__init__(lambda opts: PagesTaskSet(base), options)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp("pages")
    for name, text in PAGES.items():
        (root / name).write_text(text)
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def env(base: str) -> Iterator[PagesEnv]:
    environment = PagesEnv(base)
    yield environment
    environment.close()


def _tree(obs: str) -> str:
    return obs.split("\n\n")[1]


def _ids(tree: str) -> list[int]:
    return [int(i) for i in re.findall(r"^\t*\[(\d+)\]", tree, re.M)]


def _fill(template: str, tree: str, **known: str) -> str:
    """The template with its non-element ids ({root}, {t1}, ...) taken from `tree`, which must
    match it everywhere else."""
    pattern = re.escape(template.format(**{k: "\x00" for k in _fields(template)} | known))
    return "" if re.fullmatch(pattern.replace("\x00", r"\d+"), tree) else tree


def _fields(template: str) -> set[str]:
    return set(re.findall(r"\{(\w+)\}", template))


@pytest.mark.parametrize(("index", "template"), [(0, FORM_TREE), (1, LINKS_TREE), (2, REPEAT_TREE)])
def test_tree_text_is_pinned(env: PagesEnv, base: str, index: int, template: str) -> None:
    ep = env.new_episode()
    obs = ep.reset(index).observation
    ep.close()
    tree = _tree(obs)
    assert _fill(template, tree, base=base) == "", tree


def test_observation_layout(env: PagesEnv, base: str) -> None:
    ep = env.new_episode()
    obs = ep.reset(0).observation
    lines = obs.split("\n")
    assert lines[0] == "Tab 0 (current): Sign in" and lines[1] == ""
    assert lines[-3:] == [
        f"URL: {base}/form.html",
        "OBJECTIVE: open form.html",
        "PREVIOUS ACTION: None",
    ]
    assert ep.step("scroll [down]").observation.endswith("PREVIOUS ACTION: scroll [down]")
    ep.close()


def test_observation_cap_cuts_and_says_so() -> None:
    tree = "\n".join(f"[{i}] StaticText 'line {i}'" for i in range(100))
    obs = render("Tab 0 (current): t", tree, "u", "o", None, 300)
    assert "[... accessibility tree cut: showing" in obs and f"of {len(tree)} characters" in obs
    assert len(_tree(obs)) < 420 and obs.endswith("PREVIOUS ACTION: None")


def test_ids_stay_stable_across_steps(env: PagesEnv) -> None:
    ep = env.new_episode()
    first = _tree(ep.reset(0).observation)
    after = _tree(ep.step("type [8] [alice] [0]").observation)
    assert "[8] textbox 'User name' focused: True" in after
    assert "StaticText 'alice'" in after  # the typed value shows under the field
    assert set(_ids(first)) <= set(_ids(after))
    tabs = ep._tabs
    assert tabs is not None
    tabs.current.evaluate("document.body.insertAdjacentHTML('afterbegin', '<button>New</button>')")
    again = _tree(ep.step("click [11]").observation)
    new_id = int(re.search(r"\[(\d+)\] button 'New'", again).group(1))  # type: ignore[union-attr]
    assert new_id not in _ids(first)
    assert "[11] checkbox 'Keep me signed in' focused: True checked: true" in again
    assert "[13] button 'Log in'" in again and "[8] textbox 'User name'" in again
    ep.close()


def test_actions_navigate_tabs_and_history(env: PagesEnv, base: str) -> None:
    ep = env.new_episode()
    ep.reset(1)
    obs = ep.step("click [10]").observation  # link 'Repeat'
    assert f"URL: {base}/repeat.html" in obs and "Tab 0 (current): Repeat" in obs
    assert f"URL: {base}/links.html" in ep.step("go_back").observation
    assert f"URL: {base}/repeat.html" in ep.step("go_forward").observation
    obs = ep.step("go_back").observation  # a document loaded again: its elements, new ids
    new_tab = re.search(r"\[(\d+)\] link 'Done in a new tab'", obs).group(1)  # type: ignore[union-attr]
    obs = ep.step(f"click [{new_tab}]").observation  # target=_blank: the new tab is current
    assert obs.startswith("Tab 0: Links | Tab 1 (current): Done") and f"{base}/done.html" in obs
    assert ep.step("tab_focus [0]").observation.startswith("Tab 0 (current): Links | Tab 1: Done")
    assert ep.step("close_tab").observation.startswith("Tab 0 (current): Done\n")
    obs = ep.step("new_tab").observation
    assert obs.startswith("Tab 0: Done | Tab 1 (current): ") and "URL: about:blank" in obs
    obs = ep.step(f"goto [{base}/form.html]").observation
    assert f"URL: {base}/form.html" in obs
    user = re.search(r"\[(\d+)\] textbox 'User name'", obs).group(1)  # type: ignore[union-attr]
    obs = ep.step(f"type [{user}] [bob] [1]").observation  # Enter submits the form
    assert f"URL: {base}/done.html?user=bob" in obs and "All done." in obs
    ep.step("hover [5]")
    assert "Far below" not in ep.reset(2).observation
    assert "Far below" in ep.step("scroll [down]").observation
    assert "Far below" not in ep.step("scroll [up]").observation
    ep.reset(0)
    assert "[8] textbox 'User name' focused: True" in ep.step("press [Tab]").observation
    ep.close()


def test_invalid_actions_change_nothing(env: PagesEnv) -> None:
    ep = env.new_episode()
    before = ep.reset(0).observation
    for action, says in [
        ("click [9999]", "no element with id [9999]"),
        ("jump [3]", "unknown command 'jump [3]'"),
        ("click 8", "malformed 'click' command"),
        ("scroll [left]", "malformed 'scroll' command"),
        ("press [NoSuchKey]", "unknown key"),
        ("tab_focus [4]", "no tab 4"),
    ]:
        result = ep.step(action)
        assert result.invalid and not result.done and result.reward == 0.0
        note, rest = result.observation.split("\n\n", 1)
        assert note.startswith("NOTE: invalid action: ") and says in note, note
        assert rest == before
    assert ep.observation() == result.observation
    ep.close()


def test_type_on_a_select_chooses_the_option(env: PagesEnv) -> None:
    ep = env.new_episode()
    obs = ep.reset(3).observation
    box = re.search(r"\[(\d+)\] combobox 'Size'", obs).group(1)  # type: ignore[union-attr]
    ep.step(f"type [{box}] [Large] [0]")
    tabs = ep._tabs
    assert (
        tabs is not None and tabs.current.evaluate("document.getElementById('size').value") == "l"
    )
    bad = ep.step(f"type [{box}] [Huge] [0]")
    assert bad.invalid and "no option 'Huge'; its options: 'Small', 'Large'" in bad.observation
    ep.close()


def test_stop_ends_with_the_judges_verdict(env: PagesEnv) -> None:
    ep = env.new_episode()
    ep.reset(0)
    result = ep.step("stop [yes]")
    assert result.done and result.score == 1.0 and result.reward == 1.0
    assert result.observation.startswith("NOTE: the episode is over; judged")
    ep.reset(0)
    assert ep.step("stop [no]").score == 0.0
    ep.close()


def test_max_steps_ends_the_episode(base: str, env: PagesEnv) -> None:
    env.max_steps, old = 2, env.max_steps
    try:
        ep = env.new_episode()
        ep.reset(0)
        assert not ep.step("scroll [down]").done
        last = ep.step("scroll [up]")
        assert last.done and "the step limit was reached" in last.observation
        ep.close()
    finally:
        env.max_steps = old


def test_random_actions_are_commands_the_page_accepts(env: PagesEnv) -> None:
    """`random_action` on real pages: concrete commands on what the observation shows, written
    back unchanged by the tool calls that stand for them, never refused; None once it is over."""
    from agentgym_rl.episode.tools import ToolSet

    tools = ToolSet.from_wire([t.wire() for t in PagesEnv.tool_set()])
    rng, drawn = random.Random(0), Counter[str]()
    ep = env.new_episode()
    assert ep.random_action(rng) is None
    for index in range(len(PagesTaskSet.FILES)):
        result = ep.reset(index)
        for _ in range(10):
            action = ep.random_action(rng)
            assert action is not None
            call = tools.call_for(action)
            assert call is not None and tools.action_for(call) == action, action
            result = ep.step(action)
            assert not result.invalid, (action, result.observation)
            drawn[call.name] += 1
            if result.done:
                assert ep.random_action(rng) is None
                break
    ep.close()
    assert {"click", "type", "scroll"} <= set(drawn), drawn


class OnWorker:
    """Calls on one worker thread, as the server runs a blocking env (a second Playwright
    cannot share the module env's thread)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1)

    def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._pool.submit(fn, *args).result()

    def close(self) -> None:
        self._pool.shutdown()


def test_killed_browser_fails_only_its_episodes(base: str) -> None:
    env, run = PagesEnv(base), OnWorker()
    try:
        a, b = env.new_episode(), env.new_episode()
        run(a.reset, 0)
        run(b.reset, 1)
        old = env.pool.browser_pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        assert processes_gone([old])
        for ep in (a, b):
            with pytest.raises(EnvError) as info:
                run(ep.step, "scroll [down]")
            assert info.value.code == ErrorCode.INTERNAL and "died" in info.value.message
        c = env.new_episode()
        assert "Tab 0 (current): Sign in" in run(c.reset, 0).observation
        assert env.pool.browser_pid not in (None, old) and env.info()["browsers_crashed"] == 1
        assert "Links" in run(a.reset, 1).observation  # a failed episode can start again
        for ep in (a, b, c):
            run(ep.close)
    finally:
        run(env.close)
        run.close()


def test_browser_is_recycled_and_none_outlives_close(base: str) -> None:
    env, run = PagesEnv(base, recycle="2"), OnWorker()
    try:
        a, b = env.new_episode(), env.new_episode()
        run(a.reset, 0)
        run(b.reset, 0)
        first = env.pool.browser_pid
        assert first is not None
        first_pids = env.pool.pids()
        c = env.new_episode()
        run(c.reset, 1)  # the first browser served 2 contexts: a new one
        assert env.pool.browser_pid != first and env.info()["browsers_launched"] == 2
        assert process_alive(first)  # still serving a and b
        run(a.close)
        run(b.close)
        assert processes_gone(first_pids)
        pids = env.pool.pids()
        assert pids
        env.close()  # as the server's shutdown: from another thread than the worker
        assert processes_gone(pids)
    finally:
        env.close()
        run.close()


def test_a_dead_playwright_driver_is_replaced(base: str) -> None:
    env, run = PagesEnv(base), OnWorker()
    try:
        a = env.new_episode()
        run(a.reset, 0)
        driver = env.pool._driver
        assert driver is not None
        os.kill(driver, signal.SIGKILL)
        assert processes_gone([driver])
        with pytest.raises(EnvError):
            run(a.step, "scroll [down]")
        b = env.new_episode()
        assert "Tab 0 (current): Links" in run(b.reset, 1).observation
        assert env.pool._driver not in (None, driver)
        run(b.close)
    finally:
        run(env.close)
        run.close()
