"""The shipped small CPU configs of the science, search and web envs, end to end through `train`:
the policy created by `init-model` from the env's own text, a real env server (SciWorld: its
simulator JVMs; SearchQA: BM25 over the generated knowledge base; WebArena and MiniWoB: Chromium
and the served pages), one rollout server (vLLM) and the learner, for 2 steps; WebArena's env
server is reached over HTTP (its AgentGym WebArena dialect), the others over ZeroMQ. Learning is
not asserted (the policies are tiny and barely warmed up): steps complete, groups are used,
nothing fails in the env, held-out records are written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from train_fixtures import ROOT

pytestmark = pytest.mark.engine


# miniwob_tiny.yaml is miniwob_tools_tiny.yaml (run below) with WebArena's text commands for tool
# calls, and those commands on the same web env server are the webarena run's: its own run here
# would add ~90 s of CI for no path the two others leave untested (it loads with every shipped
# config in tests/config)
# webarena's run (~90 s) is left to `pytest -m extended`: its env server is miniwob's (run below
# with tools), and the pool's WebArena HTTP dialect is driven end to end by
# tests/evaluation/test_eval_web_http.py
# searchqa's run (~70 s) is left to `pytest -m extended` too: its env server, its BM25 and
# init-model on its text train end to end in searchqa's tools run below, and its text commands
# step its real server in tests/rollout/test_sync_loop.py
@pytest.mark.slow
@pytest.mark.parametrize(
    "env",
    [
        "sciworld",
        pytest.param("searchqa", marks=pytest.mark.extended),
        pytest.param("webarena", marks=pytest.mark.extended),
    ],
)
def test_tiny_env_config_trains_end_to_end(env: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentgym_rl.cli",
            "train",
            "--config",
            f"configs/train/{env}_tiny.yaml",
            f"run_dir={run}",
            f"model={tmp_path / 'model'}",
            "init_model.warmup_steps=10",  # the format barely matters here; CI time does
            *(["env_servers.0.transport=http"] if env == "webarena" else []),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in (run / "logs").glob("*.log"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + logs

    assert sorted(p.name for p in (run / "logs").iterdir()) == [
        f"env-{env}-0.log",
        "init-model.log",
        "learn.log",
        "rollout-0.log",
    ]
    steps = [
        json.loads(x)["step"] for x in (run / "learn" / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == [1, 2]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "finished" and summary["groups"]["used"] == 4
    assert summary["groups"]["balanced"]

    last = json.loads((run / "rollout-0" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["episodes"] >= 8 and last["generate_calls"] > 0 and last["env_failures"] == 0

    evals = [json.loads(x) for x in (run / "rollout-0" / "eval.jsonl").read_text().splitlines()]
    assert [e["version"] for e in evals] == [0, 2]
    data = ROOT / "envs" / "agentgym_envs" / env / "data" / "test.json"
    if env in ("webarena", "miniwob"):
        data = ROOT / "envs" / "agentgym_envs" / "web" / "data" / f"{env}_test.json"
    test_split = json.loads(data.read_text())
    categories = {t["category"] for t in test_split[:4]}
    assert all(set(e["by_category"]) == categories for e in evals)


# miniwob's tools run (~120 s) is left to `pytest -m extended`: the tools path trains end to end
# in searchqa's run, and miniwob's env server, browser and actions have their own tests
# (tests/envs/test_miniwob.py) and eval runs (tests/evaluation/test_eval_web_http.py)
@pytest.mark.slow
@pytest.mark.parametrize("env", ["searchqa", pytest.param("miniwob", marks=pytest.mark.extended)])
def test_tools_config_trains_end_to_end(env: str, tmp_path: Path) -> None:
    """The shipped tools configs: a created policy whose template handles tools, warmed up on
    random valid calls; episodes speak tool calls (schemas in the prompt `show` prints, results
    as `<tool_response>` blocks), none drifts, and the run's accounting balances."""
    run = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentgym_rl.cli",
            "train",
            "--config",
            f"configs/train/{env}_tools_tiny.yaml",
            f"run_dir={run}",
            f"model={tmp_path / 'model'}",
            # MiniWoB's pages make long transcripts: a short warm-up keeps CI's time; SearchQA
            # keeps the shipped one, which makes the tiny policy write some valid calls
            *(["init_model.warmup_steps=20"] if env == "miniwob" else []),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in (run / "logs").glob("*.log"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + logs
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "finished" and summary["groups"]["balanced"]
    evals = [json.loads(x) for x in (run / "rollout-0" / "eval.jsonl").read_text().splitlines()]
    assert [e["version"] for e in evals] == [0, 2]
    last = json.loads((run / "rollout-0" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["env_failures"] == 0
    assert last["drift"] == 0  # turns end where the template ends them (one end token)
    if env == "searchqa":  # some calls were valid: the env was stepped by tool calls
        assert last["env_steps"] > 0 and last["invalid_actions"] < last["generate_calls"]

    # an episode whose replies got tool results (the tiny policy's last one may have none)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tmp_path / "model"))
    logged = (run / "rollout-0" / "episodes.jsonl").read_text().splitlines()
    answered = [
        k
        for k, line in enumerate(logged)
        if "<tool_response>" in tok.decode(json.loads(line)["input_ids"])
    ]
    assert answered, "no episode got a tool result"
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentgym_rl.cli",
            "show",
            str(run),
            "--episode",
            str(answered[0]),
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert shown.returncode == 0, shown.stderr
    assert "# Tools" in shown.stdout and '"type": "function"' in shown.stdout
    assert "<tool_call>" in shown.stdout and "<tool_response>" in shown.stdout
