"""`train` with an `agent:` section, under chaos (issue 60): the example agent
(examples/openai_agent.py: the `openai` client, BabyAI over HTTP) plays every training and
held-out episode through the rollout server's endpoint, served by real vLLM; its rollout server
is SIGKILLed (the endpoint dies with it and is restarted; the agent episodes in flight are lost
with their groups) and the restarted one finishes the run. The learner trains on exactly what was sampled (no drift), the group
accounting balances (groups lost with the killed processes counted as lost, and the agent episodes
in flight in the killed rollout server counted), nothing is trained twice.

By hand, `AGENTGYM_RL_AGENT_CHAOS=full` runs the full form instead: both agent kinds (the function
and the same agent as a command line), each with an env server, the rollout server and the
learner killed (`pytest tests/e2e/test_agent_chaos.py -s` prints each run's table)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from agentgym_rl.experiments.chaos import Fault, run_chaos, table
from agentgym_rl.policy_creation import create_tiny_model
from cli_run import agentgym_cli
from tiny_run import SPLIT, tiny_train_config
from vllm_fixtures import tiny_corpus

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("AGENTGYM_RL_AGENT_CHAOS") == "full"
MAX_STEPS = 6 if FULL else 4
AGENTS = {
    "function": {"function": "examples.openai_agent:agent"},
    "command": {"command": [sys.executable, str(ROOT / "examples" / "openai_agent.py")]},
}
# CI: the rollout server (and its endpoint) at step 1; by hand: env, rollout, learner. A killed
# `train` and its resume are tests/e2e/test_chaos.py's (a learner's death ends its run there)
FAULTS = (
    [Fault("env", 1), Fault("rollout", 2), Fault("learner", 4)] if FULL else [Fault("rollout", 1)]
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(AGENTS) if FULL else ["function"])
def test_an_agent_run_survives_its_killed_processes(kind: str, tmp_path: Path) -> None:
    model = create_tiny_model(tmp_path / "model", corpus=tiny_corpus(), vocab_size=320, seed=0)
    config = tiny_train_config(str(tmp_path / "run"), str(model), max_steps=MAX_STEPS)
    config["agent"] = AGENTS[kind]
    config["restart"] = {"max_restarts": 2}
    config["learn"]["checkpoint"] = {"every_steps": 2}
    config["rollout"]["eval"] = {"split": SPLIT, "every_versions": 100, "limit": 4}
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))

    result = run_chaos(path, FAULTS, timeout_s=900, echo=False)
    run = tmp_path / "run"
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2500:]}" for p in (run / "logs").glob("*"))
    report = table(result)
    print(f"\n{kind} agent:\n{report}")
    assert result.final_step == MAX_STEPS, report + logs
    assert [f.fault.role for f in result.faults] == [f.role for f in FAULTS], report
    assert all(f.recovered_s is not None for f in result.faults), report
    if FULL:
        assert result.exit_codes == [1, 0], report  # the learner's death ends run 1
        assert result.accounting.killed["learner"] == 1, report
    else:
        assert result.exit_codes == [0], report  # the restarted rollout server finished the run

    children = [json.loads(line) for line in (run / "children.jsonl").read_text().splitlines()]
    starts = [c["child"] for c in children if c["event"] == "start"]
    # first start and restart (and by hand the resume after the learner's death)
    assert starts.count("rollout-0") == (3 if FULL else 2), starts

    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "finished" and summary["groups"]["balanced"] is True
    acc = result.accounting
    assert acc.balanced and acc.trained_twice == [], report
    assert acc.used == 2 * MAX_STEPS, report
    assert acc.killed["rollout"] >= 1, report
    # groups that went down with the killed processes are counted as lost, by cause
    assert acc.lost == sum(acc.lost_with.values()) and (acc.lost > 0 or not FULL), report
    # and so are the agent episodes the killed rollout server had in flight: every dispatched
    # group was made, filtered, aborted at a stop, or in flight when killed (whole groups)
    assert acc.dispatched >= acc.made > 0, report
    assert acc.episodes_in_flight_killed == 2 * acc.in_flight_killed, report  # group_size 2
    evals = [json.loads(x) for x in (run / "rollout-0" / "eval.jsonl").read_text().splitlines()]
    assert evals[0]["version"] == 0 and evals[-1]["version"] == MAX_STEPS
    last = json.loads((run / "rollout-0" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["drift"] == 0 and last["episodes"] >= 8
    gateway = json.loads((run / "rollout-0" / "gateway.json").read_text())
    assert gateway["url"].startswith("http://127.0.0.1:") and len(gateway["token"]) == 64
    assert "secret" not in json.dumps(gateway)
    shown = agentgym_cli("show", str(run), "--no-color")
    assert shown.returncode == 0 and "You are in a BabyAI grid world." in shown.stdout
