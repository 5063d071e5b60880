"""The WebArena task set without a browser: WebArena's evaluator rules on plain strings and a
fake page, the generated task file and its splits (counts, format, determinism), and the
task set's options (self-hosted WebArena configs from a file written here)."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentgym_envs.web import evaluators as ev
from agentgym_envs.web import make_tasks
from agentgym_envs.web.webarena import DATA, WebArenaTaskSet, load_configs

FIELDS = {"sites", "task_id", "require_login", "storage_state", "start_url", "intent"}
FIELDS |= {"intent_template", "eval"}


def _config(eval_: dict[str, Any]) -> dict[str, Any]:
    return {"intent": "Do it", "start_url": "__SHOPPING__", "sites": ["shopping"], "eval": eval_}


class FakePage:
    """What the evaluators use of a Playwright page."""

    def __init__(self, url: str, values: dict[str, Any], content: str = "") -> None:
        self.url = url
        self.values = values
        self.html = content
        self.visited: list[str] = []

    def goto(self, url: str, wait_until: str = "load") -> None:
        self.visited.append(url)
        self.url = url

    def wait_for_load_state(self, state: str = "load") -> None:
        pass

    def content(self) -> str:
        return self.html

    def evaluate(self, script: str) -> Any:
        value = self.values[script.removeprefix("() => ")]
        if isinstance(value, Exception):
            raise value
        return value


class FakeJudge(ev.FuzzyJudge):
    def ask(self, prompt: str) -> str:
        return "correct" if "blue" in prompt.split("Given answer:")[1] else "incorrect"


# -- string_match ---------------------------------------------------------------------------


def test_clean_answer_strips_unquotes_and_lowercases() -> None:
    assert ev.clean_answer('  "Hello World" ') == "hello world"
    assert ev.clean_answer("'x'") == "x"
    assert ev.clean_answer("'x\"") == "'x\""


def test_exact_and_must_include() -> None:
    assert ev.exact_match("Robin Hale", ' "robin hale" ') == 1.0
    assert ev.exact_match("Robin Hale", "Robin Hale.") == 0.0
    assert ev.must_include("$12.99", "It costs $12.99 today") == 1.0
    # a one-character reference alone is matched against word tokens: "0" is not in "10"
    assert ev.must_include("0", "10 reviews", tokenize=True) == 0.0
    assert ev.must_include("0", "0 reviews", tokenize=True) == 1.0
    assert ev.must_include("0", "10 reviews", tokenize=False) == 1.0


def test_string_match_multiplies_items() -> None:
    config = _config(
        {"eval_types": ["string_match"], "reference_answers": {"must_include": ["Kettle", "Rake"]}}
    )
    assert ev.string_match(config, "the Kettle and the rake", None) == 1.0
    assert ev.string_match(config, "the kettle", None) == 0.0
    single = _config({"eval_types": ["string_match"], "reference_answers": {"must_include": ["3"]}})
    assert ev.string_match(single, "3", None) == 1.0
    assert ev.string_match(single, "13", None) == 0.0
    exact = _config({"eval_types": ["string_match"], "reference_answers": {"exact_match": "N/A"}})
    assert ev.string_match(exact, "n/a", None) == 1.0


def test_fuzzy_match_needs_a_judge_and_uses_it() -> None:
    config = _config(
        {"eval_types": ["string_match"], "reference_answers": {"fuzzy_match": ["It is blue"]}}
    )
    assert ev.unsupported(config, None) is not None
    with pytest.raises(ev.Unscorable):
        ev.string_match(config, "blue", None)
    judge = FakeJudge("http://judge.invalid/v1", "m")
    assert ev.unsupported(config, judge) is None
    assert ev.string_match(config, "a blue one", judge) == 1.0
    assert ev.string_match(config, "red", judge) == 0.0
    assert ev.string_match(config, "", judge) == 0.0  # a blank answer never reaches the judge


def test_judge_failure_is_reported() -> None:
    judge = ev.FuzzyJudge("http://127.0.0.1:9/v1", "m", timeout_s=2)
    with pytest.raises(ev.JudgeError):
        judge.grade("Do it", "blue", "blue")


# -- url_match, program_html ----------------------------------------------------------------


def test_url_match() -> None:
    ref = "http://shop:7770/category/kitchen?sort=price"
    assert ev.url_match(ref, "http://shop:7770/category/kitchen/?sort=price&page=2") == 1.0
    assert ev.url_match(ref, "http://shop:7770/category/kitchen?sort=name") == 0.0
    assert ev.url_match(ref, "http://shop:7770/category/garden?sort=price") == 0.0
    assert ev.url_match("http://shop:7770/cart/", "http://shop:7770/cart") == 1.0
    either = "http://shop:7770/a |OR| http://shop:7770/b"
    assert ev.url_match(either, "http://shop:7770/b") == 1.0
    assert ev.url_match(either, "http://other:7770/b") == 0.0
    with pytest.raises(ev.Unscorable):
        ev.url_match(ref, ref, "EXACT")


def test_contents_match() -> None:
    assert ev.contents_match({"exact_match": "3"}, " 3 ") == 1.0
    assert ev.contents_match({"exact_match": "3"}, "13") == 0.0
    must = {"must_include": ["hello", "world |OR| earth"]}
    assert ev.contents_match(must, "Hello Earth") == 1.0
    assert ev.contents_match(must, "hello mars") == 0.0


def test_evaluate_program_html_and_url_multiply() -> None:
    locator = "document.querySelector('#q').value"
    config = _config(
        {
            "eval_types": ["url_match", "program_html"],
            "reference_url": "__SHOPPING__/cart",
            "program_html": [
                {
                    "url": "last",
                    "locator": "",
                    "required_contents": {"must_include": ["<b>"]},
                },
                {
                    "url": "__SHOPPING__/cart",
                    "locator": locator,
                    "required_contents": {"exact_match": "2"},
                },
            ],
        }
    )
    base = "http://127.0.0.1:1"
    mapper = lambda u: u.replace("__SHOPPING__", base)  # noqa: E731
    page = FakePage(f"{base}/cart", {locator: "2"}, "<p>&lt;b&gt;</p>")
    assert ev.evaluate(config, page, "", mapper).score == 1.0  # type: ignore[arg-type]
    assert page.visited == [f"{base}/cart"]
    page = FakePage(f"{base}/cart", {locator: "3"}, "<p>&lt;b&gt;</p>")
    outcome = ev.evaluate(config, page, "", mapper)  # type: ignore[arg-type]
    assert (outcome.score, outcome.note) == (0.0, "failed: program_html")
    page = FakePage(f"{base}/", {locator: RuntimeError("no element")}, "<b>")
    assert ev.evaluate(config, page, "", mapper).score == 0.0  # type: ignore[arg-type]


def test_func_helpers_are_unscored() -> None:
    config = _config(
        {
            "eval_types": ["program_html"],
            "program_html": [
                {
                    "url": "func:reddit_get_post_url('__last_url__')",
                    "locator": "",
                    "required_contents": {"must_include": ["x"]},
                }
            ],
        }
    )
    assert "func:" in (ev.unsupported(config, None) or "")


# -- the generated task set -----------------------------------------------------------------


def _rows(name: str) -> list[dict[str, str]]:
    return json.loads((DATA / name).read_text())


def test_task_counts_and_splits() -> None:
    tasks = load_configs(DATA / "webarena_tasks.json")
    assert len(tasks) >= 200
    counts = Counter(t["category"] for t in tasks)
    assert set(counts) == {f"{s}/{k}" for s in ("shop", "forum") for k in ("info", "nav", "action")}
    for i, t in enumerate(tasks):
        assert FIELDS <= set(t) and t["task_id"] == i and t["storage_state"] is None
        assert t["start_url"].startswith(("__SHOPPING__", "__REDDIT__"))
    test, train = _rows("webarena_test.json"), _rows("webarena_train.json")
    assert len(test) == 50 and len(train) + len(test) + 6 == len(tasks)
    ids = [r["item_id"] for r in test + train]
    assert len(set(ids)) == len(ids)
    fuzzy = {i for i, t in enumerate(tasks) if make_tasks.is_fuzzy(t)}
    assert len(fuzzy) == 6 and not fuzzy & {int(i.split("_")[1]) for i in ids}
    for row in test + train:
        assert row["category"] == tasks[int(row["item_id"].removeprefix("webarena_"))]["category"]
    kinds = Counter(k for t in tasks for k in t["eval"]["eval_types"])
    assert kinds["string_match"] and kinds["url_match"] and kinds["program_html"]


def test_generator_is_deterministic(tmp_path: Path) -> None:
    make_tasks.write(tmp_path)
    for name in ("webarena_tasks.json", "webarena_train.json", "webarena_test.json"):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name


# -- options, self-hosted WebArena ----------------------------------------------------------


WEBARENA_TASK = {
    "sites": ["shopping"],
    "task_id": 7,
    "require_login": True,
    "storage_state": "./.auth/shopping_state.json",
    "start_url": "__SHOPPING__",
    "geolocation": None,
    "intent_template": "What is {{x}}?",
    "instantiation_dict": {"x": "y"},
    "intent": "What is y?",
    "require_reset": False,
    "eval": {
        "eval_types": ["string_match"],
        "reference_answers": {"exact_match": "z"},
        "reference_url": "",
        "program_html": [],
        "string_note": "",
        "url_note": "GOLD in PRED",
    },
}


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown webarena options"):
        WebArenaTaskSet.from_options({"colour": "red"})
    with pytest.raises(ValueError, match="tasks=PATH"):
        WebArenaTaskSet.from_options({"url.__SHOPPING__": "http://h:1"})
    with pytest.raises(ValueError, match="judge_model"):
        WebArenaTaskSet.from_options({"judge_url": "http://j/v1"})


def test_webarena_task_files(tmp_path: Path) -> None:
    folder = tmp_path / "config_files"
    folder.mkdir()
    reddit = {
        **WEBARENA_TASK,
        "sites": ["reddit"],
        "start_url": "__REDDIT__/f/books",
        "eval": {
            **WEBARENA_TASK["eval"],
            "eval_types": ["program_html"],
            "program_html": [
                {
                    "url": "func:reddit_get_post_url('__last_url__')",
                    "locator": "",
                    "required_contents": {"must_include": ["x"]},
                }
            ],
        },
    }
    for i, config in enumerate([WEBARENA_TASK] * 10 + [reddit]):
        (folder / f"{i}.json").write_text(json.dumps({**config, "task_id": i}))
    with pytest.raises(ValueError, match=r"url\.__REDDIT__"):
        WebArenaTaskSet.from_options({"tasks": str(folder), "url.__SHOPPING__": "http://h:7770"})
    ts = WebArenaTaskSet.from_options(
        {
            "tasks": str(folder),
            "url.__SHOPPING__": "http://h:7770/",
            "url.__REDDIT__": "http://r:9999",
        }
    )
    assert len(ts) == 11 and ts.sites is None
    assert [ts.task(i).meta["config"]["task_id"] for i in (2, 10)] == [2, 10]  # numeric order
    assert ts.task(0).start_url == "http://h:7770" and ts.task(0).category == "shopping"
    assert ts.task(10).start_url == "http://r:9999/f/books" and not ts.task(10).scored
    assert ts.judge(ts.task(10), None, "x").note.startswith("unscored")  # type: ignore[arg-type, union-attr]
    only = WebArenaTaskSet.from_options(
        {"tasks": str(folder), "sites": "shopping", "url.__SHOPPING__": "http://h:7770"}
    )
    assert len(only) == 10
    listed = tmp_path / "test.raw.json"
    listed.write_text(json.dumps([WEBARENA_TASK, reddit]))
    ts = WebArenaTaskSet.from_options(
        {"tasks": str(listed), "url.__SHOPPING__": "http://h:1", "url.__REDDIT__": "http://r:2"}
    )
    assert len(ts) == 2 and ts.task(0).scored
    assert ts.judge(ts.task(0), FakePage("http://h:1", {}), None).done is False  # type: ignore[arg-type]
    assert ts.judge(ts.task(0), FakePage("http://h:1", {}), '"Z"').score == 1.0  # type: ignore[arg-type]
    assert ts.judge(ts.task(0), FakePage("http://h:1", {}), "w").score == 0.0  # type: ignore[arg-type]


def test_judge_request_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fuzzy judge speaks OpenAI's chat API: model, messages, a bearer key from the env."""
    seen: list[tuple[str, str, dict[str, Any]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            seen.append((self.path, self.headers.get("authorization", ""), body))
            reply = json.dumps({"choices": [{"message": {"content": "Correct"}}]}).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("JUDGE_KEY", "k123")
        url = f"http://127.0.0.1:{server.server_port}/v1"
        judge = ev.FuzzyJudge(url, "judge-m", "JUDGE_KEY")
        assert judge.grade("Do it", "blue", "a blue one") == 1.0
    finally:
        server.shutdown()
        thread.join()
    path, auth, body = seen[0]
    assert (path, auth, body["model"]) == ("/v1/chat/completions", "Bearer k123", "judge-m")
    assert "a blue one" in body["messages"][-1]["content"]


class FakeContext:
    def __init__(self) -> None:
        self.cookies: list[dict[str, Any]] = []

    def add_cookies(self, cookies: list[dict[str, Any]]) -> None:
        self.cookies += cookies


def test_storage_state_cookies_sign_a_webarena_task_in(tmp_path: Path) -> None:
    (tmp_path / "tasks.json").write_text(json.dumps([WEBARENA_TASK]))
    cookie = {"name": "sid", "value": "v", "domain": "h", "path": "/"}
    auth = tmp_path / "auth"
    auth.mkdir()
    (auth / "shopping_state.json").write_text(json.dumps({"cookies": [cookie], "origins": []}))
    options = {"tasks": str(tmp_path / "tasks.json"), "url.__SHOPPING__": "http://h:1"}
    context = FakeContext()
    ts = WebArenaTaskSet.from_options({**options, "auth_dir": str(auth)})
    ts.prepare(ts.task(0), context, "s")  # type: ignore[arg-type]
    assert context.cookies == [cookie]


def test_own_sites_start_and_stop() -> None:
    ts = WebArenaTaskSet.from_options({})
    shop = ts.urls["__SHOPPING__"]
    assert ts.task(0).start_url.startswith(shop) and len(ts) == 261
    with urllib.request.urlopen(shop + "/") as reply:
        assert reply.status == 200 and b"One Stop Shop" in reply.read()
    context = FakeContext()
    ts.prepare(ts.task(0), context, "episode-1")  # type: ignore[arg-type]
    assert context.cookies[0]["name"] == "agentgym_session"
    assert context.cookies[0]["value"] == "episode-1"
    ts.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(shop + "/", timeout=2)
