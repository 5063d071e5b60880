"""`train` with an `agent:` section: the example agent (examples/openai_agent.py) (the `openai` client, BabyAI over
HTTP) plays every training and held-out episode through the rollout server's endpoint, served by
real vLLM; the learner trains on what it sampled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agentgym_rl.policy_creation import create_tiny_model
from cli_run import agentgym_cli
from tiny_run import SPLIT, tiny_train_config
from vllm_fixtures import tiny_corpus

pytestmark = pytest.mark.engine


@pytest.mark.slow
def test_train_runs_a_users_agent_end_to_end(tmp_path: Path) -> None:
    model = create_tiny_model(tmp_path / "model", corpus=tiny_corpus(), vocab_size=320, seed=0)
    run = tmp_path / "run"
    config = tiny_train_config(str(run), str(model))
    # the pool steps over ZeroMQ; the agent gets the same servers' HTTP addresses
    config["agent"] = {"function": "examples.openai_agent:agent"}
    config["rollout"]["eval"] = {
        "split": SPLIT,
        "every_versions": 2,
        "limit": 4,
        "temperature": 0.0,
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    done = agentgym_cli("train", "--config", str(path), timeout_s=900)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in (run / "logs").glob("*.log"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + logs

    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "finished" and summary["groups"]["balanced"]
    assert summary["groups"]["used"] == 4
    evals = [json.loads(x) for x in (run / "rollout-0" / "eval.jsonl").read_text().splitlines()]
    assert [e["version"] for e in evals] == [0, 2]
    last = json.loads((run / "rollout-0" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["drift"] == 0 and last["episodes"] >= 8
    gateway = json.loads((run / "rollout-0" / "gateway.json").read_text())
    assert gateway["url"].startswith("http://127.0.0.1:") and len(gateway["token"]) == 64
    assert "secret" not in json.dumps(gateway)
    shown = agentgym_cli("show", str(run), "--no-color")
    assert shown.returncode == 0 and "You are in a BabyAI grid world." in shown.stdout
