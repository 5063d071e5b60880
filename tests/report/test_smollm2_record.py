"""scripts/smollm2_record.py: a seed's record from its run folder and what was evaluated into it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from smollm2_record import record


def _served(run: Path, env: str, **rollout: object) -> None:
    """The rollout server's config as `train` writes it into the run folder."""
    config = {
        "model": "runs/models/base",
        "learner": {"endpoints": ["tcp://127.0.0.1:5555"]},
        "envs": [{"env": env, "addresses": ["tcp://127.0.0.1:5556"]}],
        "dataset": {"env": env, "split": f"{env}_test.json"},
        **rollout,
    }
    (run / "configs").mkdir()
    (run / "configs" / "rollout-0.yaml").write_text(yaml.safe_dump(config))


def _eval(folder: Path, success: float, temperature: float = 0.0, n: int = 1) -> None:
    folder.mkdir()
    report = {
        "n": n,
        "meta": {"options": {"engine": {"temperature": temperature}}},
        "rows": [{"category": "all", "tasks": 200, "avg": success}],
        "yardsticks": {"goto_test": {"chance": {"all": 0.427}, "rule": {"all": 0.98}}},
    }
    (folder / "eval.json").write_text(json.dumps(report))


def test_the_record_reads_every_split_and_probe_in_step_order(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "learn").mkdir(parents=True)
    engine = {"dtype": "float32", "max_tokens_per_turn": 24}
    _served(run, "babyai", engine=engine, scaling_inter={"turn_caps": [5]})
    (run / "run.jsonl").write_text(
        json.dumps({"outcome": "stopped", "exit_code": 0, "resume": False, "start": 0, "end": 60})
        + "\n"
        + json.dumps(
            {"outcome": "finished", "exit_code": 0, "resume": True, "start": 100, "end": 130}
        )
        + "\n"
    )
    steps = [{"step": 1, "step_s": 9.0, "loss": 0.5}, {"step": 1, "step_s": 8.0}, {"step": 2}]
    (run / "learn" / "metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    _eval(run / "eval-v10", 0.6)
    _eval(run / "eval-v2", 0.3)
    _eval(run / "eval-ladder-v20", 0.7)
    _eval(run / "eval-distractor_test-v0", 0.2)
    (run / "eval-v20-notes").mkdir()  # not an evaluation folder
    (run / "probe-v0.json").write_text(json.dumps({"overall": {"tasks": 145}}))

    rec = record(run, "agentgym-rl train ...", "a note")

    assert list(rec["goto_test_greedy_cap5"]) == ["v2", "v10"]  # by step, not by name
    assert rec["goto_test_greedy_cap5"]["v10"]["all"] == {
        "tasks": 200,
        "success": 0.6,
        "chance": 0.427,
        "rule": 0.98,
    }
    assert list(rec["ladder_test_greedy_cap5"]) == ["v20"]
    assert rec["distractor_test_greedy_cap5"]["v0"]["all"]["success"] == 0.2
    assert rec["goal_probe_distractor_test"] == {"v0": {"overall": {"tasks": 145}}}
    assert rec["wall_s"] == 90.0  # both invocations, not the pause between them
    assert [s["step"] for s in rec["steps"]] == [1, 2] and rec["steps"][0]["step_s"] == 8.0
    assert "float32, cap 5, 24 tokens a turn" in rec["evaluation"]


def test_the_record_names_the_run_s_own_cap(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "learn").mkdir(parents=True)
    _served(run, "textcraft", engine={"dtype": "bfloat16"}, scaling_inter={"turn_caps": [4, 8]})
    (run / "run.jsonl").write_text(json.dumps({"start": 0, "end": 1}) + "\n")
    (run / "learn" / "metrics.jsonl").write_text("")
    _eval(run / "eval-shallow_test-v20", 0.9)
    _eval(run / "sampled-shallow_test-v20", 0.5, temperature=0.7, n=4)
    _eval(run / "sampled-shallow_test-v0", 0.4, temperature=0.7, n=4)

    rec = record(run, "agentgym-rl train ...", "")

    assert rec["shallow_test_greedy_cap8"]["v20"]["all"]["success"] == 0.9
    sampled = rec["shallow_test_sampled_cap8"]
    assert (sampled["temperature"], sampled["samples_per_task"]) == (0.7, 4)
    assert [sampled[v]["all"]["success"] for v in ("v0", "v20")] == [0.4, 0.5]
    assert "cap 8" in rec["evaluation"]
