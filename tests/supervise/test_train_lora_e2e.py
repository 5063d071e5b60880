"""`agentgym-rl train` with `learn.lora` end to end on the tiny model: the learner trains
adapters alone, the weight stream carries them alone (megabytes, not the model), the rollout
server generates with each version's adapters, and checkpoints hold the adapters with an HF
export of the merged weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agentgym_rl.policy_creation import create_tiny_model
from cli_run import agentgym_cli
from tiny_run import tiny_train_config
from vllm_fixtures import tiny_corpus

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def test_train_with_lora_streams_adapters_alone(tmp_path: Path) -> None:
    model = create_tiny_model(tmp_path / "model", corpus=tiny_corpus(), vocab_size=320, seed=0)
    run = tmp_path / "run"
    config = tiny_train_config(str(run), str(model), max_steps=3)
    config["learn"]["lora"] = {"rank": 4, "alpha": 8.0}
    config["learn"]["loss"] = {"kl_coef": 0.05}  # the reference: the base, adapters off
    config["learn"]["optimizer"]["lr"] = 5e-3
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    done = agentgym_cli("train", "--config", str(path), timeout_s=900)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in (run / "logs").glob("*.log"))
    assert done.returncode == 0, done.stdout + done.stderr + logs

    metrics = [json.loads(x) for x in (run / "learn" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    weights_mb = sum(p.stat().st_size for p in model.glob("*.safetensors")) / 1e6
    sent = [m["publish_mb"] for m in metrics if m.get("publish_acked")]
    assert sent and max(sent) < weights_mb / 4, (sent, weights_mb)  # adapters, not the model
    episodes = [
        json.loads(x) for x in (run / "rollout-0" / "episodes.jsonl").read_text().splitlines()
    ]
    late = [e for e in episodes if e["dispatch_version"] >= 1]
    assert late, "no episode generated after the first adapters arrived"
    for e in late:  # each turn generated whole by the adapters of one version
        for s, t in e["turn_spans"]:
            assert len(set(e["versions"][s:t])) == 1
    ckpt = max((run / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))
    assert (ckpt / "COMPLETE").is_file() and (ckpt / "hf" / "model.safetensors").is_file()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "finished" and summary["groups"]["balanced"]
