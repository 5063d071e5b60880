"""The run viewer's web app in process: its page and API, the token when bound beyond loopback,
and clear errors that leave it serving."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.viewer.test_episode_index import write_log

from agentgym_rl.viewer.app import COOKIE, ViewerApp
from agentgym_rl.viewer.page_data import RunView


def calls(app: ViewerApp, *requests: tuple[str, dict[str, str]]) -> list[httpx.Response]:
    async def go() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://viewer") as client:
            return [await client.get(url, headers=headers) for url, headers in requests]

    return asyncio.run(go())


def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "rollout-0").mkdir()
    write_log(tmp_path / "rollout-0" / "episodes.jsonl", range(30))
    return tmp_path


def test_page_and_api_without_a_token(tmp_path: Path) -> None:
    app = ViewerApp(RunView(run_dir(tmp_path)))
    page, js, rows, one, bad, gone, route, other = calls(
        app,
        ("/", {}),
        ("/static/view.js", {}),
        ("/api/episodes?split=held_out&size=4", {}),
        ("/api/episode/0.5", {}),
        ("/api/episodes?version_min=soon", {}),
        ("/api/episode/0.500", {}),
        ("/api/nothing", {}),
        ("/static/../secret", {}),
    )
    assert page.status_code == 200 and '<script src="/static/view.js">' in page.text
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    body: dict[str, Any] = rows.json()
    assert [r["ref"] for r in body["rows"]] == ["0.0", "0.5", "0.10", "0.15"]
    episode = one.json()
    assert episode["summary"]["split"] == "held_out" and not episode["decoded"]
    trained = "".join(b["text"] for b in episode["blocks"] if b["kind"] == "text" and b["trained"])
    assert trained == " ".join(str(i) for i in range(6, 12)) + " "  # ids: no tokenizer named
    assert bad.status_code == 400 and "version_min must be a whole number" in bad.json()["error"]
    assert gone.status_code == 404 and "no episode '0.500'" in gone.json()["error"]
    assert route.status_code == 404 and other.status_code == 404


def test_beyond_loopback_the_token_is_asked_for_once(tmp_path: Path) -> None:
    app = ViewerApp(RunView(run_dir(tmp_path)), token="s3cret-token-of-the-run")
    bare, wrong, first, bearer = calls(
        app,
        ("/api/overview", {}),
        ("/?token=guess", {}),
        ("/?token=s3cret-token-of-the-run", {}),
        ("/api/overview", {"Authorization": "Bearer s3cret-token-of-the-run"}),
    )
    assert bare.status_code == 401 and "needs the run's token" in bare.text
    assert wrong.status_code == 401
    assert first.status_code == 200
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=s3cret-token-of-the-run") and "HttpOnly" in cookie
    assert bearer.status_code == 200 and bearer.json()["episodes"]["indexed"] == 30
    (with_cookie,) = calls(app, ("/api/episodes", {"Cookie": f"{COOKIE}=s3cret-token-of-the-run"}))
    assert with_cookie.status_code == 200 and with_cookie.json()["matched"] == 30


def test_a_run_folder_without_records_says_what_is_missing(tmp_path: Path) -> None:
    app = ViewerApp(RunView(tmp_path))
    overview, rows = calls(app, ("/api/overview", {}), ("/api/episodes", {}))
    missing = overview.json()["missing"]
    assert any("no episodes.jsonl under this folder yet" in m for m in missing)
    assert any("no learner records" in m for m in missing)
    assert rows.status_code == 200 and rows.json()["rows"] == []
    run_dir(tmp_path)  # the rollout server starts logging: the page picks the log up
    (rows,) = calls(app, ("/api/episodes", {}))
    assert rows.json()["matched"] == 30


def test_view_command_refuses_bad_input_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentgym_rl.cli import main

    assert main(["view", str(tmp_path / "missing")]) == 2
    assert "no such run folder" in capsys.readouterr().err
    loose = tmp_path / "secret"
    loose.write_text("x" * 40)
    loose.chmod(0o644)  # others may read it: refused, as every reader of the secret refuses it
    code = main(["view", str(tmp_path), "--host", "0.0.0.0", "--token-file", str(loose)])
    assert code == 2 and "view: " in capsys.readouterr().err
