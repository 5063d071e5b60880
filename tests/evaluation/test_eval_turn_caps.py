"""`eval --turn-cap A --turn-cap B`: one policy at several test-time caps on one engine, against a
real BabyAI server; the table of success against cap is what each cap's own report says."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agentgym_rl.cli import build_parser, main
from agentgym_rl.commands.evaluate import eval_options
from agentgym_rl.config.rollout import EngineConfig
from agentgym_rl.evaluation import EvalError, EvalOptions, run_evaluation
from agentgym_rl.evaluation.turn_caps import sweep_turn_caps
from vllm_fixtures import EngineHandle

SPLIT = Path(__file__).resolve().parents[2] / "envs/agentgym_envs/babyai/data/goto_test.json"


def test_sweep_evaluates_each_cap_on_one_engine(
    vllm_engine: EngineHandle, spawn_server, tmp_path: Path
) -> None:
    server = spawn_server("babyai")
    options = EvalOptions(
        split=[SPLIT],
        env_addresses={"babyai": [server.zmq]},
        limit=4,
        out=tmp_path,
        engine=EngineConfig(max_tokens_per_turn=32),
        progress=False,
    )
    sweep = vllm_engine.run(
        sweep_turn_caps(options, [3, 1, 3], engine=vllm_engine.engine), timeout=300
    )
    assert sorted(sweep.reports) == [1, 3]
    for cap, report in sweep.reports.items():
        assert len(report.records) == 4
        written = json.loads((tmp_path / f"cap-{cap}" / "eval.json").read_text())
        assert written["meta"]["options"]["turn_cap"] == cap
        logged = [json.loads(line) for line in (tmp_path / f"cap-{cap}" / "episodes.jsonl").open()]
        assert len(logged) == 4 and all(1 <= e["turns"] <= cap for e in logged)
    rows = json.loads((tmp_path / "caps.json").read_text())["rows"]
    assert [(r["cap"], r["env"], r["episodes"]) for r in rows] == [
        (1, "babyai", 4),
        (3, "babyai", 4),
    ]
    for row in rows:
        report = sweep.reports[row["cap"]]
        assert row["avg"] == pytest.approx(report.row("babyai").avg)
        capped = sum(r.status == "turn_cap" for r in report.records) / 4
        assert row["capped"] == pytest.approx(capped)
    assert (tmp_path / "caps.md").read_text() == sweep.to_markdown()
    # an engine passed in is left running: it still plays an episode
    again = options.model_copy(update={"limit": 1, "turn_cap": 1, "out": None})
    report = vllm_engine.run(run_evaluation(again, engine=vllm_engine.engine), timeout=120)
    assert len(report.records) == 1


def test_sweep_starts_missing_env_servers_once_for_every_cap(
    vllm_engine: EngineHandle, tmp_path: Path
) -> None:
    options = EvalOptions(split=[SPLIT], limit=2, out=tmp_path, progress=False)
    sweep = vllm_engine.run(
        sweep_turn_caps(options, [1, 2], engine=vllm_engine.engine), timeout=300
    )
    assert {cap: len(r.records) for cap, r in sweep.reports.items()} == {1: 2, 2: 2}
    assert all(r.status != "env_failure" for rep in sweep.reports.values() for r in rep.records)
    # the sweep's own servers (their log in OUT), not a start per cap (a log in each OUT/cap-N)
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("env-*.log")] == [
        Path("env-babyai.log")
    ]


def test_turn_cap_flag_repeats_and_bad_caps_are_refused(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        [
            "eval",
            "--model",
            str(tmp_path),
            "--split",
            str(SPLIT),
            "--turn-cap",
            "5",
            "--turn-cap",
            "2",
        ]
    )
    assert args.turn_caps == [5, 2]
    assert eval_options(args).turn_cap == 5
    with pytest.raises(EvalError, match="--turn-cap must be >= 1"):
        asyncio.run(sweep_turn_caps(EvalOptions(split=[SPLIT], model=tmp_path), [0, 3]))


@pytest.mark.process  # the command runs owned: its watchdog is a process
def test_eval_without_out_prints_its_table_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--out` is optional: the table is printed, no file named (the flag left out is absent
    from the parsed flags, so the command reads the options, not the flags)."""
    from agentgym_rl.episode.scoring import EvalRecord, summarize
    from agentgym_rl.evaluation import job

    async def played(options: EvalOptions) -> object:
        assert options.out is None and options.n == 2
        record = EvalRecord("babyai", "GoToObj", "babyai_1", True, 1.0)
        return summarize([record], {"policy": "x"})

    monkeypatch.setattr(job, "run_evaluation", played)
    argv = ["eval", "--model", str(tmp_path), "--split", str(SPLIT), "--n", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "babyai" in out and "wrote" not in out
    assert not list(tmp_path.iterdir())
