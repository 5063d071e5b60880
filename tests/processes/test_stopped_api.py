"""The stopped-command matrix for the Python API: a script calling `evaluate(...)` or
`train(..., background=True)`, stopped by SIGINT, SIGTERM or SIGKILL while it works. A Python
process killed by a signal runs no handler of ours (SIGTERM's default ends it at once), so
these cases are the ownership watchdog's: nothing the call started outlives the script, and an
evaluation's finished episodes are kept. Real processes throughout.

CI runs `evaluate` stopped by SIGTERM while it works; the rest is in the whole matrix,
`pytest tests/processes/test_stopped_*.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from stopping import SIGNALS, by_signal, learner_steps, lines, start

from agentgym_rl.episode.log import EPISODES_FILE

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
SPLIT = ROOT / "envs/agentgym_envs/babyai/data/goto_test.json"

EVALUATE = """
import sys
from agentgym_rl import evaluate
from agentgym_rl.config.rollout import EngineConfig

engine = EngineConfig(max_tokens_per_turn=48, dtype="float32", max_model_len=1024)
evaluate(sys.argv[1], splits=sys.argv[2], out=sys.argv[3], limit=200, n=4, turn_cap=5,
         engine=engine, progress=False)
"""

TRAIN = """
import sys, time
from agentgym_rl import train

train(sys.argv[1], background=True)
time.sleep(3600)
"""


@pytest.mark.parametrize(
    "sig",
    by_signal(),
)
def test_evaluate_stopped_leaves_nothing_and_keeps_its_episodes(
    tiny_model: Path, sig: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    w = start(["-c", EVALUATE, str(tiny_model), str(SPLIT), str(out)], tmp_path)
    episodes = out / EPISODES_FILE
    try:
        w.wait_for("a first episode", lambda: lines(episodes) >= 1)
        logged = lines(episodes)
        w.stop(sig)
        assert lines(episodes) >= logged
        w.assert_no_temporary_files()
    finally:
        w.clean_up()


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.parametrize("sig", SIGNALS)
def test_background_train_stopped_with_its_script_leaves_nothing(
    tiny_model: Path, sig: str, tmp_path: Path
) -> None:
    from tiny_run import tiny_train_config

    run = tmp_path / "run"
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump(tiny_train_config(str(run), str(tiny_model), max_steps=50)))
    w = start(["-c", TRAIN, str(config)], tmp_path)
    try:
        w.wait_for("a first step", lambda: learner_steps(run) >= 1, timeout_s=300)
        w.stop(sig)
        w.assert_no_temporary_files()
    finally:
        w.clean_up()
