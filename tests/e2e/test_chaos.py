"""Chaos on a real run: an env server, the rollout server and the learner are each SIGKILLed at
different steps of one `train` run on the tiny model, then `train --resume` finishes it. Every
fault is recovered from, a rollout server that comes back holds the learner's weights before it
generates, and every group the rollout servers made is accounted for. The groups in flight are
sized automatically (`buffer.in_flight: auto`), so that path meets every fault too.

The learner trains low-rank adapters (`learn.lora`), so this is also LoRA's run end to end: the
weight stream carries the adapters alone, the rollout server merges each version into its
weights (`lora_serving: merged`, the default) and generates with it, a restarted server gets
them before it generates, the resume reads them from an adapter
checkpoint, and checkpoints hold them beside an HF export of the merged weights. (LoRA had its
own run here; it cost 1.5 CI minutes for nothing this one leaves untested.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agentgym_rl.experiments.chaos import Fault, run_chaos, table
from agentgym_rl.policy_creation import create_tiny_model
from cli_run import agentgym_cli
from tiny_run import tiny_train_config
from vllm_fixtures import tiny_corpus

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]

MAX_STEPS = 7


def _config(tmp_path: Path) -> Path:
    """Two envs, BabyAI and Maze, each with its held-out split, Maze at its own turn cap: the
    mixed run meets every fault a one-env run does, and more, in the same time (a one-env
    variant ran here too, 2.7 CI minutes for nothing the mixed one leaves untested)."""
    model = create_tiny_model(tmp_path / "model", corpus=tiny_corpus(), vocab_size=320, seed=0)
    config = tiny_train_config(str(tmp_path / "run"), str(model), max_steps=MAX_STEPS)
    config["restart"] = {"max_restarts": 2}
    config["learn"]["checkpoint"] = {"every_steps": 2}
    # groups in flight sized from measured engine time (Little's law) through every fault
    config["rollout"]["buffer"]["in_flight"] = "auto"
    config["learn"]["lora"] = {"rank": 4, "alpha": 8.0}
    config["learn"]["loss"] = {"kl_coef": 0.05}  # the reference: the base, adapters off
    config["learn"]["optimizer"]["lr"] = 5e-3
    test_split = ROOT / "envs/agentgym_envs/babyai/data/goto_test.json"
    config["rollout"]["eval"] = {"limit": 4, "every_versions": 100}
    config["env_servers"].append({"env": "maze", "replicas": 1, "transport": "zmq"})
    config["rollout"]["envs"] = [
        {"env": "babyai", "eval_split": str(test_split)},
        {"env": "maze", "eval_split": "test", "scaling_inter": {"turn_caps": [2]}},
    ]
    babyai = config["rollout"]["dataset"]
    config["rollout"]["dataset"] = {
        "mix": [{"env": "babyai", "split": babyai["split"]}, {"env": "maze", "split": "train"}],
        "group_size": babyai["group_size"],
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
def test_kills_of_env_rollout_and_learner_are_recovered_and_accounted(tmp_path: Path) -> None:
    faults = [Fault("env", 1), Fault("rollout", 2), Fault("learner", 5)]
    result = run_chaos(_config(tmp_path), faults, timeout_s=900, echo=False)
    run = tmp_path / "run"
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2500:]}" for p in (run / "logs").glob("*"))
    report = table(result)
    assert result.final_step == MAX_STEPS, report + logs
    assert [f.fault.role for f in result.faults] == ["env", "rollout", "learner"], report
    assert all(f.recovered_s is not None for f in result.faults), report
    assert result.exit_codes == [1, 0], report  # the learner's death ends run 1; resume ends it
    # checkpoints every 2 steps; the kill lands on step 5 or, when the learner outran the
    # 0.5 s poll, a later one: what is lost is counted from the newest complete checkpoint
    learner = result.faults[2]
    kept = learner.at_step - learner.steps_lost
    assert kept % 2 == 0 and 4 <= kept <= learner.at_step < kept + 3, report
    steps = [json.loads(line) for line in (run / "learn" / "metrics.jsonl").open()]
    after = [r["step"] for r in steps if r["time"] > learner.killed_at]
    assert after and min(after) == kept + 1, (kept, after)  # the resume went on from there

    # every restart and the resume are in the supervisor's record
    children = [json.loads(line) for line in (run / "children.jsonl").read_text().splitlines()]
    starts = [c["child"] for c in children if c["event"] == "start"]
    assert starts.count("env-babyai-0") == 3 and starts.count("rollout-0") == 3, starts

    # a rollout server that came back (restarted, or started by --resume) held the learner's
    # weights before it generated: its held-out eval ran at the learner's version, never at 0
    versions = [json.loads(line)["version"] for line in (run / "rollout-0" / "eval.jsonl").open()]
    assert versions[0] == 0 and all(v > 0 for v in versions[1:]) and len(versions) >= 3, versions
    assert kept in versions, versions  # the resumed run's server evaluated the checkpoint's

    summary = json.loads((run / "summary.json").read_text())  # the report of the resumed run
    assert summary["outcome"] == "finished" and summary["groups"]["balanced"] is True
    acc = result.accounting
    assert acc.balanced and acc.made > 0, report
    assert acc.trained_twice == [], report
    assert acc.killed == {"rollout": 1, "learner": 1}, report
    assert acc.used == 2 * MAX_STEPS, report  # two groups a step, over the surviving steps
    assert acc.lost == sum(acc.lost_with.values()) and acc.lost_with["learner killed"] >= 2
    # the in-flight cap stayed between one step's groups and max_in_flight, in every server life
    status = [json.loads(line) for line in (run / "rollout-0" / "metrics.jsonl").open()]
    caps = [r["max_in_flight"] for r in status]
    assert caps and all(2 <= cap <= 4 for cap in caps), caps
    # auto measured the engine's share of an episode's life (a fixed cap records none)
    shares = [r["engine_share"] for r in status if "engine_share" in r]
    assert shares and all(0.0 <= share <= 1.0 for share in shares), shares
    # and how many requests of the measured length its KV cache holds: at least every episode
    # the ceiling allows (4 groups of 2), the cache being sized for them at max_model_len
    fits = [r["engine_fits"] for r in status if "engine_fits" in r]
    assert fits and all(fit >= 8 for fit in fits), fits
    # both envs trained, evaluated each time, and the resumed mix went on drawing
    records = [json.loads(line) for line in (run / "rollout-0" / "eval.jsonl").open()]
    assert all(set(r["by_env"]) == {"babyai", "maze"} for r in records)
    assert all(r["by_env"]["maze"]["turn_cap"] == 2 for r in records)
    ledger = [json.loads(line) for line in (run / "rollout-0" / "groups.jsonl").open()]
    sent = [r["sent"].split("#")[0].rsplit("_", 1)[0] for r in ledger if "sent" in r]
    assert set(sent) == {"babyai", "maze"}

    # LoRA: adapters alone on the stream; merged into the engine's weights, a turn's tokens
    # carry the versions they were sampled under (as with full weights), never going back
    model = tmp_path / "model"
    weights_mb = sum(p.stat().st_size for p in model.glob("*.safetensors")) / 1e6
    published = [r["publish_mb"] for r in steps if r.get("publish_acked")]
    assert published and max(published) < weights_mb / 4, (published, weights_mb)
    episodes = [json.loads(line) for line in (run / "rollout-0" / "episodes.jsonl").open()]
    late = [e for e in episodes if e["dispatch_version"] >= 1]
    assert late, "no episode generated after the first adapters arrived"
    for e in late:
        turns = [e["versions"][s:t] for s, t in e["turn_spans"]]
        assert all(v == sorted(v) for v in turns), e["versions"]
    assert any(v >= 1 for e in late for v in e["versions"]), "no token of merged adapters"
    last = run / "checkpoints" / f"step_{MAX_STEPS}"
    assert (last / "COMPLETE").is_file() and (last / "hf" / "model.safetensors").is_file()
    assert (last / "adapter" / "adapter_config.json").is_file()

    # resumed once more, the finished run has nothing left to do: it says so, starts nothing
    before = (run / "children.jsonl").read_text()
    again = agentgym_cli("train", "--resume", str(run))
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"already finished at step {MAX_STEPS}" in again.stdout + again.stderr
    assert (run / "children.jsonl").read_text() == before
