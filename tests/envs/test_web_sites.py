"""Our shop and forum, served by the WebArena task set, driven over HTTP and by real Chromium
(Playwright directly: one site server and one browser for the module): known-good action
sequences solve an information task on each site and state-changing tasks pass program_html,
a wrong answer scores 0, parallel sessions never see each other's cart, and a WebArena-format
task file runs against the shop through the url.* placeholder mapping."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentgym_envs.web.sites.state import SessionStore
from agentgym_envs.web.taskset import WebTask
from agentgym_envs.web.webarena import WebArenaTaskSet

pytestmark = pytest.mark.process

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def ts() -> Iterator[WebArenaTaskSet]:
    taskset = WebArenaTaskSet.from_options({})
    yield taskset
    taskset.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip("no chromium")
    pw = playwright.sync_playwright().start()
    chromium = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    yield chromium
    chromium.close()
    pw.stop()


_sessions = iter(range(10**6))


def _find(ts: WebArenaTaskSet, category: str, template: str) -> WebTask:
    return next(
        ts.task(i)
        for i in range(len(ts))
        if ts.task(i).category == category
        and ts.task(i).meta["config"]["intent_template"].startswith(template)
    )


def _episode(ts: WebArenaTaskSet, browser: Any, task: WebTask) -> Any:
    """A fresh context prepared for the task (as the core does) with its start page loaded."""
    context = browser.new_context()
    ts.prepare(task, context, f"test-{next(_sessions)}")
    page = context.new_page()
    page.goto(task.start_url)
    return page


def _values(task: WebTask) -> dict[str, Any]:
    return task.meta["config"]["instantiation_dict"]


# -- HTTP ------------------------------------------------------------------------------------


def test_pages_and_sessions(ts: WebArenaTaskSet) -> None:
    shop, forum = ts.urls["__SHOPPING__"], ts.urls["__REDDIT__"]
    a, b = httpx.Client(base_url=shop), httpx.Client(base_url=shop)
    for path in ("/", "/category/kitchen?sort=rating", "/search?q=kettle", "/cart"):
        assert a.get(path).status_code == 200, path
    assert a.get("/product/nope").status_code == 404
    assert "agentgym_session" in a.cookies and a.cookies["agentgym_session"] != b.cookies.get(
        "agentgym_session"
    )
    b.get("/")
    product = ts.sites.shop.data.products[5]  # type: ignore[union-attr]
    a.post("/cart/add", data={"product": str(product.id), "qty": "2"})
    assert f"cart-{product.sku}" in a.get("/cart").text
    assert f"cart-{product.sku}" not in b.get("/cart").text  # the other session's cart
    assert "Please sign in" in a.get("/account/orders").text
    f = httpx.Client(base_url=forum)
    for path in ("/", "/f/books", "/f/books/1", "/search?q=advice", "/user/amber_otter"):
        assert f.get(path).status_code == 200, path
    assert f.post("/f/books/1/reply", data={"body": "hi all"}).status_code == 303
    assert "hi all" in f.get("/f/books/1").text
    assert "hi all" not in httpx.get(f"{forum}/f/books/1").text


def test_session_store_is_bounded() -> None:
    store: SessionStore[list[int]] = SessionStore(list, max_sessions=2)
    store.get("a").append(1)
    store.get("b")
    store.get("c")  # "a" is the least recently used: dropped
    assert len(store) == 2 and store.get("a") == []
    idle: SessionStore[list[int]] = SessionStore(list, idle_s=0.0)
    idle.get("a").append(1)
    idle.get("b")
    assert len(idle) == 1


# -- Chromium --------------------------------------------------------------------------------


def test_shop_info_task(ts: WebArenaTaskSet, browser: Any) -> None:
    task = _find(ts, "shop/info", "What is the price")
    page = _episode(ts, browser, task)
    product = _values(task)["product"]
    assert ts.judge(task, page, None).done is False
    page.get_by_label("Search products").fill(product)
    page.get_by_role("button", name="Search").click()
    page.get_by_role("link", name=product).click()
    price = page.locator("#price").inner_text()
    assert ts.judge(task, page, f"It costs {price}.").score == 1.0
    verdict = ts.judge(task, page, "$1.00")
    assert (verdict.score, verdict.done) == (0.0, True)
    page.context.close()


def test_forum_info_and_nav_tasks(ts: WebArenaTaskSet, browser: Any) -> None:
    task = _find(ts, "forum/info", "Who posted the thread")
    page = _episode(ts, browser, task)
    title = _values(task)["title"]
    page.get_by_label("Search threads").fill(title.rstrip("?"))
    page.get_by_role("button", name="Search").click()
    page.get_by_role("link", name=title, exact=True).click()
    author = page.locator("#thread .author").inner_text()
    assert ts.judge(task, page, author).score == 1.0
    assert ts.judge(task, page, "nobody").score == 0.0
    nav = _find(ts, "forum/nav", "Go to the profile page")
    assert ts.judge(nav, page, "").score == 0.0
    page.goto(ts.map_url(f"__REDDIT__/user/{_values(nav)['user']}"))
    assert ts.judge(nav, page, "").score == 1.0
    page.context.close()


def test_cart_action_task_and_parallel_sessions(ts: WebArenaTaskSet, browser: Any) -> None:
    task = _find(ts, "shop/action", "Add {n} of the")
    n, product = _values(task)["n"], _values(task)["product"]
    page, other = _episode(ts, browser, task), _episode(ts, browser, task)
    assert ts.judge(task, page, "done").score == 0.0
    page.goto(ts.map_url(f"__SHOPPING__/search?q={product.split()[0]}"))
    page.get_by_role("link", name=product).click()
    page.get_by_label("Quantity").fill(str(n))
    page.get_by_role("button", name="Add to Cart").click()
    assert ts.judge(task, page, "done").score == 1.0
    assert ts.judge(task, other, "done").score == 0.0  # the parallel episode's cart is its own
    again = _episode(ts, browser, task)  # a new episode starts from the base state
    assert ts.judge(task, again, "done").score == 0.0
    for p in (page, other, again):
        p.context.close()


def test_order_and_forum_action_tasks(ts: WebArenaTaskSet, browser: Any) -> None:
    info = _find(ts, "shop/info", "What was the grand total")
    page = _episode(ts, browser, info)  # require_login: the session is signed in
    page.get_by_role("link", name="My Orders").click()
    page.get_by_role("link", name=f"#{_values(info)['number']}").click()
    assert ts.judge(info, page, page.locator("#order-total").inner_text()).score == 1.0
    page.context.close()
    task = _find(ts, "forum/action", "Reply to the thread")
    page = _episode(ts, browser, task)
    title, text = _values(task)["title"], _values(task)["text"]
    page.get_by_label("Search threads").fill(title.rstrip("?"))
    page.get_by_role("button", name="Search").click()
    page.get_by_role("link", name=title, exact=True).click()
    page.get_by_label("Your reply").fill(text)
    page.get_by_role("button", name="Post Reply").click()
    assert ts.judge(task, page, "done").score == 1.0
    page.context.close()


def test_webarena_config_file_on_our_shop(
    ts: WebArenaTaskSet, browser: Any, tmp_path: Path
) -> None:
    """A WebArena-format file, its placeholders mapped to our shop as to a self-hosted one."""
    product = ts.sites.shop.data.products[0]  # type: ignore[union-attr]
    config = {
        "sites": ["shopping"], "task_id": 0, "require_login": False, "storage_state": None,
        "start_url": f"__SHOPPING__/product/{product.slug}", "geolocation": None,
        "intent_template": "Add one {{product}} to the cart", "instantiation_dict": {},
        "intent": f"Add one {product.name} to the cart", "require_reset": True,
        "eval": {
            "eval_types": ["program_html"], "reference_answers": None, "reference_url": "",
            "program_html": [{"url": "__SHOPPING__/cart", "locator": "",
                              "required_contents": {"must_include": [f"cart-{product.sku}"]}}],
        },
    }  # fmt: skip
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([config]))
    own = WebArenaTaskSet.from_options(
        {"tasks": str(path), "url.__SHOPPING__": ts.urls["__SHOPPING__"]}
    )
    task = own.task(0)
    page = _episode(own, browser, task)
    assert own.judge(task, page, "").score == 0.0
    page.goto(task.start_url)
    page.get_by_role("button", name="Add to Cart").click()
    assert own.judge(task, page, "").score == 1.0
    page.context.close()


def _id(observation: str, role: str, name: str) -> str:
    found = re.search(rf"\[(\d+)\] {role} '{re.escape(name)}'", observation)
    assert found is not None, f"no {role} {name!r} in:\n{observation}"
    return found.group(1)


def test_env_solves_a_shop_and_a_forum_task_with_webarena_commands() -> None:
    """Through the core's env: the agent's commands on the accessibility tree, then stop. The
    env runs on a thread of its own, as on the server's env worker (this thread's Playwright is
    the module's browser)."""
    env_module = pytest.importorskip("agentgym_envs.web.env")
    if not os.path.exists(CHROMIUM):
        pytest.skip("no chromium")
    with ThreadPoolExecutor(1) as worker:
        worker.submit(_solve_with_env, env_module).result(timeout=120)


def _solve_with_env(env_module: Any) -> None:
    env = env_module.WebArenaEnvironment(chromium=CHROMIUM)
    try:
        ts = env.taskset
        task = _find(ts, "shop/info", "What is the price")
        product = _values(task)["product"]
        episode = env.new_episode()
        obs = episode.reset(task.index).observation
        box = _id(obs, "searchbox", "Search products")
        obs = episode.step(f"type [{box}] [{product}]").observation  # 1 = press Enter: search
        obs = episode.step(f"click [{_id(obs, 'link', product)}]").observation
        price = re.search(r"StaticText '(\$\d+\.\d\d)'", obs)
        assert price is not None, obs
        result = episode.step(f"stop [{price.group(1)}]")
        assert (result.score, result.done) == (1.0, True)
        wrong = env.new_episode()
        wrong.reset(task.index)
        assert wrong.step("stop [$0.01]").score == 0.0
        _solve_a_forum_task(env)
    finally:
        env.close()


def _solve_a_forum_task(env: Any) -> None:
    """Search the forum, open the thread, read its author off the tree, stop with it."""
    task = _find(env.taskset, "forum/info", "Who posted the thread")
    title = _values(task)["title"]
    episode = env.new_episode()
    obs = episode.reset(task.index).observation
    obs = episode.step(f"type [{_id(obs, 'searchbox', 'Search threads')}] [{title.rstrip('?')}]")
    obs = episode.step(f"click [{_id(obs.observation, 'link', title)}]").observation
    author = re.search(r"StaticText 'Submitted on [^']* by '\n\t*\[\d+\] link '([^']+)'", obs)
    assert author is not None, obs
    result = episode.step(f"stop [{author.group(1)}]")
    assert (result.score, result.done) == (1.0, True)
