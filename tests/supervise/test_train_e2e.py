"""`agentgym-rl train` end to end on the tiny model: a real BabyAI env server, one rollout
server (vLLM) and the learner, for 2 learner steps; every child logs, plots and summary are
written, nothing outlives the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from train_fixtures import ROOT

from agentgym_rl.model import create_tiny_model
from tiny_run import tiny_train_config
from vllm_fixtures import tiny_corpus


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.slow
def test_train_two_steps_on_the_tiny_model(tmp_path: Path) -> None:
    model = create_tiny_model(tmp_path / "model", corpus=tiny_corpus(), vocab_size=320, seed=0)
    run = tmp_path / "run"
    config = tiny_train_config(str(run), str(model))
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [sys.executable, "-m", "agentgym_rl.cli", "train", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in (run / "logs").glob("*.log"))
    assert done.returncode == 0, done.stdout + done.stderr + logs

    assert sorted(p.name for p in (run / "logs").iterdir()) == [
        "env-babyai-0.log",
        "learn.log",
        "rollout-0.log",
    ]
    steps = [
        json.loads(line)["step"]
        for line in (run / "learn" / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == [1, 2]
    assert (run / "checkpoints").is_dir() and (run / "rollout-0" / "metrics.jsonl").is_file()
    plots = {p.name for p in (run / "plots").iterdir()}
    assert {"success_reward.png", "throughput.png", "turns.png", "staleness.png"} <= plots
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["outcome"] == "finished"
    assert f"summary in {run / 'summary.md'}" in done.stdout
    assert _processes_mentioning(str(run)) == []  # no child outlived the run
