"""A stopped command leaves nothing behind: each command that starts processes, stopped by
SIGINT, SIGTERM or SIGKILL in each phase (its children starting, its work, its results), ends
with no process of its tree left, and keeps what it had finished. Real processes throughout.

CI runs the cases not marked `extended` (`eval` stopped by SIGTERM while its engine starts
and while it works); the whole matrix, with the serving commands (test_stopped_servers.py)
and the Python API (test_stopped_api.py), is `pytest tests/processes/test_stopped_*.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stopping import engine_core_started, exit_code, lines, start_cli

from agentgym_rl.episode.log import EPISODES_FILE

pytestmark = pytest.mark.engine  # each case starts vLLM (in the eval it stops)

ROOT = Path(__file__).resolve().parents[2]
SPLIT = ROOT / "envs/agentgym_envs/babyai/data/goto_test.json"


# eval: the tasks of each phase. `working` has far more episodes than it reaches; `results`
# logs all of its episodes, then plays the yardsticks and writes its report.
EVAL_TASKS = {"starting": (200, 4), "working": (200, 4), "results": (24, 1)}


def _eval_argv(model: Path, out: Path, phase: str) -> list[str]:
    limit, n = EVAL_TASKS[phase]
    argv = ["eval", "--model", str(model), "--split", str(SPLIT), "--out", str(out)]
    argv += ["--limit", str(limit), "--n", str(n), "--turn-cap", "5", "--no-progress"]
    argv += ["--max-tokens-per-turn", "48", "--dtype", "float32", "--max-model-len", "1024"]
    return argv + (["--yardsticks"] if phase == "results" else [])


def _in_ci(phase: str, sig: str) -> bool:
    """CI's slice (each case starts an engine, ~25-40 s): SIGTERM while the engine starts and
    while it works. SIGKILL leaves the cleaning to the watchdog alone, as a SIGTERM to a script
    calling `evaluate` does (its default action): CI runs that one (test_stopped_api.py)."""
    return sig == "SIGTERM" and phase != "results"


@pytest.mark.parametrize(
    ("phase", "sig"),
    [
        pytest.param(p, s, marks=[] if _in_ci(p, s) else [pytest.mark.extended])
        for p in EVAL_TASKS
        for s in ("SIGINT", "SIGTERM", "SIGKILL")
    ],
)
def test_eval_stopped_leaves_nothing_and_keeps_its_episodes(
    tiny_model: Path, tmp_path: Path, phase: str, sig: str
) -> None:
    out = tmp_path / "out"
    w = start_cli(_eval_argv(tiny_model, out, phase), tmp_path)
    episodes = out / EPISODES_FILE
    try:
        if phase == "starting":
            w.wait_for("vLLM's engine core", lambda: engine_core_started(w))
        elif phase == "working":
            w.wait_for("a first episode", lambda: lines(episodes) >= 1)
        else:
            w.wait_for("every episode", lambda: lines(episodes) >= EVAL_TASKS[phase][0])
        logged = lines(episodes)
        w.stop(sig)
        assert lines(episodes) >= logged  # what it finished is kept
        if sig != "SIGKILL":
            said = w.output()
            assert w.proc.returncode == exit_code(sig), said
            assert f"eval: stopped by {sig}" in said, said
        w.assert_no_temporary_files()
        if phase == "results" and (out / "eval.json").is_file():  # finished before the signal
            assert json.loads((out / "eval.json").read_text())["meta"]["tasks"] == 24
    finally:
        w.clean_up()
