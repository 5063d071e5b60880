"""`agentgym-rl eval` against a real `webarena` env server over HTTP: the env pool speaks the
server's dialect (AgentGym's WebArena one: `/create` answers `env_idx`), so the episodes are
played and scored. A scripted chat API (tests/scripted_chat.py) answers the shop's price task
with the right `stop [...]` command in a fence; the server runs Chromium and our shop."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentgym_envs.web.webarena import TASKS_FILE
from agentgym_rl.cli import main
from agentgym_rl.processes.env_servers import EnvServerProcess
from asgi_procs import AsgiProc

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        shutil.which("chromium") is None, reason="Debian's chromium is not installed"
    ),
]


def test_eval_over_http_on_a_web_server(tmp_path: Path) -> None:
    task = json.loads(TASKS_FILE.read_text())[0]  # "What is the price of the <product>?"
    answer = task["eval"]["reference_answers"]["must_include"][0]
    split = tmp_path / "split.json"
    split.write_text(json.dumps([{"item_id": "webarena_0", "category": task["category"]}]))
    script = {"SCRIPTED_ACTION": f"```stop [${answer}]```"}
    chat = AsgiProc("scripted_chat:app", script, ready_path="/v1/models").start()
    server = EnvServerProcess("webarena").start(timeout_s=60)
    out = tmp_path / "eval"
    try:
        argv = ["eval", "--api-base", f"{chat.url}/v1", "--api-model", "scripted"]
        argv += ["--split", str(split), "--env-address", f"webarena={server.http}"]
        assert main([*argv, "--n", "2", "--out", str(out), "--no-progress"]) == 0
    finally:
        server.stop()
        chat.stop()
    data = json.loads((out / "eval.json").read_text())
    assert data["env_failures"] == {"episodes": 0, "reasons": {}}
    assert data["statuses"] == {"done": 2}, data["statuses"]
    row = next(r for r in data["rows"] if r["category"] == "all")
    assert (row["avg"], row["pass"]) == (1.0, 1.0)
