"""The stopped-command matrix for the commands that run a whole system: `train` (its supervisor
and children: env servers, serve-rollouts with vLLM's engine core, learn), `chaos` (a `train` of
its own beneath it) and `soak` (env servers and serve-rollouts, no learner), each stopped by
SIGINT, SIGTERM or SIGKILL while it works. No process of its tree is left, its temporary folder
is empty, and what it had finished is kept: the run's record says it was stopped (train, chaos),
the soak's samples so far are written. Real processes throughout.

CI runs `chaos` and `soak` stopped by SIGTERM: chaos passes its SIGTERM to its `train`, which
is `train`'s own SIGTERM case; the whole matrix is `pytest tests/processes/test_stopped_*.py`.
(`launch`'s jobs outlive it on purpose; a SLURM or Ray job stopped by its scheduler is
tests/cluster's: `scancel` and `ray job stop` leave no process.)
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from stopping import SIGNALS, Watched, by_signal, exit_code, learner_steps, start_cli

from agentgym_rl.experiments.soak_figures import ROLLOUT
from tiny_run import tiny_train_config

pytestmark = [pytest.mark.engine, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
STOPPING_S = 120.0
"""A stopped run's own unwinding (rollout servers drain, the learner ends its step): longer
than a single server's `stopping.BOUND_S`."""


def _config(tiny_model: Path, tmp_path: Path) -> tuple[Path, Path]:
    run = tmp_path / "run"
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump(tiny_train_config(str(run), str(tiny_model), max_steps=50)))
    return config, run


def _stopped_run(w: Watched, sig: str, run: Path) -> None:
    """The run's last invocation is recorded as stopped by `sig` (SIGKILL: nothing to record)."""
    if sig == "SIGKILL":
        return
    assert w.proc.returncode == exit_code(sig), w.output()
    last = json.loads((run / "run.jsonl").read_text().splitlines()[-1])
    assert (last["outcome"], last["exit_code"]) == (sig, exit_code(sig)), last


def _stop_a_working_run(argv: list[str], run: Path, sig: str, tmp_path: Path) -> str:
    """Start `argv`, stop it by `sig` after the run's first step; nothing is left, the run's
    record says it was stopped. Returns the command's output."""
    w = start_cli(argv, tmp_path)
    try:
        w.wait_for("a first step", lambda: learner_steps(run) >= 1, timeout_s=300)
        w.stop(sig, bound_s=STOPPING_S)
        _stopped_run(w, sig, run)
        w.assert_no_temporary_files()
        return w.output()
    finally:
        w.clean_up()


@pytest.mark.extended
@pytest.mark.parametrize("sig", SIGNALS)
def test_train_stopped_leaves_nothing_and_records_it(
    tiny_model: Path, sig: str, tmp_path: Path
) -> None:
    config, run = _config(tiny_model, tmp_path)
    _stop_a_working_run(["train", "--config", str(config)], run, sig, tmp_path)


@pytest.mark.parametrize("sig", by_signal())
def test_chaos_stopped_stops_its_train_and_leaves_nothing(
    tiny_model: Path, sig: str, tmp_path: Path
) -> None:
    """A fault at a step the run never reaches: chaos only follows its train when stopped."""
    config, run = _config(tiny_model, tmp_path)
    argv = ["chaos", "--config", str(config), "--fault", "env@1000"]
    out = _stop_a_working_run(argv, run, sig, tmp_path)
    if sig != "SIGKILL":
        assert f"chaos: stopped by {sig}; its train run stopped too" in out


@pytest.mark.parametrize("sig", by_signal())
def test_soak_stopped_keeps_its_samples_and_leaves_nothing(
    tiny_model: Path, sig: str, tmp_path: Path
) -> None:
    out = tmp_path / "soak"
    argv = ["soak", "--env", "babyai", "--episodes", "100000", "--every", "20"]
    w = start_cli([*argv, "--model", str(tiny_model), "--out", str(out)], ROOT)
    soaked = out / "babyai" / "rollout" / "metrics.jsonl"
    try:
        w.wait_for("25 episodes", lambda: _episodes(soaked) >= 25, timeout_s=300)
        time.sleep(2.0)  # past the soak's sample at 20 (its watch reads the count 4 times a second)
        w.stop(sig, bound_s=STOPPING_S)
        if sig != "SIGKILL":
            text = w.output()
            assert w.proc.returncode == exit_code(sig), text
            assert "(stopped early)" in text and "| babyai | rollout server |" in text
            result = json.loads((out / "babyai" / "soak.json").read_text())
            assert result["stopped"] is True and result["episodes"] >= 25
            samples = result["samples"]
            assert [s["episodes"] for s in samples if s["process"] == ROLLOUT][:1] == [0]
            assert len(samples) >= 2 * 2  # the start and 20 episodes, both processes
        w.assert_no_temporary_files()
    finally:
        w.clean_up()


def _episodes(metrics: Path) -> int:
    rows = metrics.read_text().splitlines() if metrics.is_file() else []
    try:
        return int(json.loads(rows[-1]).get("episodes", 0)) if rows else 0
    except ValueError:
        return 0
