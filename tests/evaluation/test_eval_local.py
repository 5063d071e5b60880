"""`evaluate` on the local path: the shared vLLM engine running the training agent loop against a
real BabyAI server. The random tiny model rarely acts validly, so the accounting is asserted
(tasks, samples, files, episode logs readable by `show`), not success."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentgym_rl.cli import main
from agentgym_rl.config.rollout import EngineConfig
from agentgym_rl.episode.log import read_episodes
from agentgym_rl.evaluation import EvalError, EvalOptions, run_evaluation
from agentgym_rl.evaluation.job import load_tasks
from vllm_fixtures import EngineHandle

SPLIT = Path(__file__).resolve().parents[2] / "envs/agentgym_envs/babyai/data/goto_test.json"


def test_local_engine_accounting_and_files(
    vllm_engine: EngineHandle, spawn_server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = spawn_server("babyai")
    out = tmp_path / "eval"
    options = EvalOptions(
        split=[SPLIT],
        env_addresses={"babyai": [server.zmq]},
        n=2,
        turn_cap=2,
        limit=3,
        out=out,
        engine=EngineConfig(max_tokens_per_turn=48),
        progress=False,
    )
    report = vllm_engine.run(run_evaluation(options, engine=vllm_engine.engine), timeout=300)

    tasks = json.loads(SPLIT.read_text())[:3]
    assert report.n == 2 and len(report.records) == 6
    assert [r.item_id for r in report.records] == [t["item_id"] for t in tasks for _ in range(2)]
    overall = report.row("babyai")
    assert (overall.tasks, overall.samples) == (3, 6)
    assert {r.category for r in report.rows} == {t["category"] for t in tasks} | {"all"}
    successes = sum(r.success for r in report.records)
    assert overall.avg == pytest.approx(successes / 6)  # equal samples per task: same mean
    assert all(r.status in {"done", "turn_cap", "truncated"} for r in report.records)

    assert (out / "eval.md").read_text() == report.to_markdown()
    # chance and the rule, measured on the same 3 tasks and cap, stand beside the policy
    sticks = report.yardsticks["babyai"]
    assert sticks["turn_cap"] == 2 and set(sticks["chance"]) == set(sticks["rule"])
    assert {r.category for r in report.rows} == set(sticks["rule"])
    assert "| chance | rule |" in (out / "eval.md").read_text()
    assert (out / "yardsticks.json").is_file()
    data = json.loads((out / "eval.json").read_text())
    assert data["n"] == 2 and data["meta"]["tasks"] == 3 and len(data["episodes"]) == 6

    logged = list(read_episodes(out / "episodes.jsonl"))
    assert len(logged) == 6
    assert sorted(r.item_id for r in logged) == sorted(r.item_id for r in report.records)
    for rec in logged:
        assert rec.turn_cap == 2 and 1 <= rec.turns <= 2 and rec.trained_tokens > 0
        assert len(rec.turn_spans) == rec.turns
        assert rec.split == "held_out" and rec.invalid_turns is not None  # evaluated, not trained
    assert main(["show", str(out), "--no-color"]) == 0
    shown = capsys.readouterr().out
    assert "«" in shown and "turns " in shown and "/2 · stage 0" in shown


def test_bad_options_fail_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="exactly one of --model DIR or --api-base"):
        EvalOptions(split=[SPLIT]).check()
    with pytest.raises(EvalError, match="--api-base needs --api-model"):
        EvalOptions(split=[SPLIT], api_base="http://127.0.0.1:1/v1").check()
    with pytest.raises(EvalError, match="not a local HF checkpoint"):
        EvalOptions(split=[SPLIT], model=tmp_path).check()
    with pytest.raises(EvalError, match="--split is required"):
        EvalOptions(model=tmp_path).check()
    with pytest.raises(ValidationError, match="n\n  Input should be greater than or equal to 1"):
        EvalOptions(split=[SPLIT], n=0)
    with pytest.raises(EvalError, match=r"--split: .*missing\.json"):
        load_tasks(EvalOptions(split=[tmp_path / "missing.json"]))
