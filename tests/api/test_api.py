"""The public Python API: configs from and to YAML, a run started and followed from Python, its
records read back; errors before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import agentgym_rl
from agentgym_rl.policy_creation import create_tiny_model
from processes_seen import processes_mentioning
from tiny_run import SPLIT, tiny_train_config
from vllm_fixtures import tiny_corpus

ROOT = Path(__file__).resolve().parents[2]
GOTO_TEST = "envs/agentgym_envs/babyai/data/goto_test.json"


def test_the_public_names_load_and_are_listed() -> None:
    for name in agentgym_rl.__all__:
        assert getattr(agentgym_rl, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        agentgym_rl.trian  # noqa: B018


def test_a_config_round_trips_through_yaml(tmp_path: Path) -> None:
    config = agentgym_rl.TrainConfig.from_yaml(
        ROOT / "configs/train/babyai_goto.yaml", ["learn.max_steps=5", "max_staleness=0"]
    )
    assert (config.learn.max_steps, config.max_staleness) == (5, 0)
    text = config.to_yaml(tmp_path / "again.yaml")
    assert agentgym_rl.TrainConfig.from_yaml(tmp_path / "again.yaml") == config
    assert "max_steps: 5" in text
    with pytest.raises(agentgym_rl.ConfigError, match=r"rollout\.engine\.temprature: Extra inputs"):
        agentgym_rl.TrainConfig.from_yaml(
            None, ["model=m", "env_servers=[{env: noop}]", "rollout.engine.temprature=1"]
        )


def test_a_run_that_cannot_start_raises_before_anything_starts(tmp_path: Path) -> None:
    config = agentgym_rl.TrainConfig.model_validate(
        tiny_train_config(str(tmp_path / "run"), str(tmp_path / "no-model"))
    )
    with pytest.raises(agentgym_rl.PlanError, match=r"model: model directory .* not found"):
        agentgym_rl.train(config, background=True)
    assert not (tmp_path / "run").exists()
    with pytest.raises(agentgym_rl.PlanError, match="is not a train run folder"):
        agentgym_rl.resume(tmp_path)


def test_runs_open_reads_what_a_run_wrote(tmp_path: Path) -> None:
    (tmp_path / "learn").mkdir()
    (tmp_path / "rollout-0").mkdir()
    steps = [{"step": s, "loss": 0.1 * s, "time": 100.0 + s} for s in (1, 2)]
    (tmp_path / "learn" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    evals = [{"version": 0, "success": 0.25, "episodes": 4}, {"version": 2, "success": 0.5}]
    (tmp_path / "rollout-0" / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in evals))
    run = agentgym_rl.runs.open(tmp_path)
    assert [r["step"] for r in run.metrics] == [1, 2] and run.held_out() == [(0, 0.25), (2, 0.5)]
    pytest.importorskip("pandas")
    frame = run.frame()
    assert frame["step"].tolist() == [1, 2] and frame["loss"].tolist() == pytest.approx([0.1, 0.2])
    assert run.frame("evals")["version"].tolist() == [0, 2]
    with pytest.raises(ValueError, match=r"no episodes\.jsonl"):
        list(run.episodes())
    with pytest.raises(FileNotFoundError):
        agentgym_rl.runs.open(tmp_path / "missing")


@pytest.mark.engine
@pytest.mark.slow
def test_train_in_the_background_then_read_the_run(tmp_path: Path) -> None:
    """The tiny run through `train(background=True)`, which runs `agentgym-rl train --config`
    as a user would (so this is also the CLI's end-to-end run): every child logs, plots, summary
    and yardsticks are written, nothing outlives the run; then its records read from Python."""
    model = create_tiny_model(tmp_path / "model", corpus=tiny_corpus(), vocab_size=320, seed=0)
    run_dir = tmp_path / "run"
    data = tiny_train_config(str(run_dir), str(model))
    # held-out tasks at v0 and v2, with the yardsticks measured on the env servers' options
    data["env_servers"][0]["args"] = ["--env-option", "observation=compact"]
    data["rollout"]["eval"] = {"split": GOTO_TEST, "every_versions": 2, "limit": 3}
    config = agentgym_rl.TrainConfig.model_validate(data)
    handle = agentgym_rl.train(config, background=True)
    assert handle.status()["running"]
    result = handle.wait(timeout_s=900)
    log = (run_dir / "logs" / "train.log").read_text()
    assert result.ok and result.outcome == "finished", log[-4000:]
    assert handle.status() == {"running": False, "step": 2, "exit_code": 0}
    assert f"summary in {run_dir / 'summary.md'}" in log
    assert sorted(p.name for p in (run_dir / "logs").iterdir()) == [
        "env-babyai-0.log",
        "learn.log",
        "rollout-0.log",
        "train.log",
    ]
    plots = {p.name for p in (run_dir / "plots").iterdir()}
    assert {"success_reward.png", "throughput.png", "turns.png", "staleness.png"} <= plots
    assert "eval_by_category.png" in plots
    [sticks] = json.loads((run_dir / "rollout-0" / "yardsticks.json").read_text()).items()
    assert "observation=compact" in sticks[0] and "cap=3" in sticks[0]
    assert 0.0 <= sticks[1]["chance"]["all"] <= sticks[1]["rule"]["all"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["outcome"] == "finished"
    assert summary["yardsticks"]["babyai"]["rule"] == sticks[1]["rule"]["all"]
    assert processes_mentioning(str(run_dir)) == []  # no child outlived the run

    run = agentgym_rl.runs.open(run_dir)
    assert [r["step"] for r in run.metrics] == [1, 2] == [r["step"] for r in handle.metrics()]
    episodes = list(run.episodes())
    assert episodes and all(1 <= e.turns <= e.turn_cap == 3 for e in episodes)
    assert (run_dir / "summary.md").is_file()
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"actor/loss", "actor/kl", "actor/clip_frac", "perf/tokens_per_s"} <= tags, tags
    assert {"train/reward_mean", "train/success", "perf/gen_tokens_per_s"} <= tags, tags
    assert [e.step for e in events.Scalars("actor/loss")] == [1, 2]

    # its last checkpoint evaluated as the run ran (engine settings, prompts, env options)
    report = agentgym_rl.evaluate(run=run_dir, splits=SPLIT, limit=2, progress=False)
    assert report.meta["policy"] == str(run_dir / "checkpoints" / "step_2" / "hf")
    assert report.meta["tasks"] == 2 and len(report.records) == 2
    assert report.meta["options"]["turn_cap"] == 3
    assert report.meta["options"]["engine"]["dtype"] == "float32"
    assert report.row("babyai").samples == 2


@pytest.mark.process
def test_rollout_any_python_policy_on_a_served_env() -> None:
    """Episodes with a plain function as the policy, on an env server `serve_env` keeps up for
    the block; then with a coroutine function and a server the call starts itself."""
    replies: list[int] = []

    def turn_left(messages: list[dict[str, str]]) -> str:
        replies.append(len(messages))
        return "Thought: look around.\nAction: turn left"

    with agentgym_rl.serve_env("babyai", observation="compact") as addresses:
        zmq, http = addresses
        assert zmq.startswith("tcp://") and http.startswith("http://")
        episodes = agentgym_rl.play(
            turn_left, ["babyai_3", "babyai_5"], n=2, turn_cap=3, env_addresses={"babyai": [zmq]}
        )
    assert [(e.task.item_id, e.sample) for e in episodes] == [
        ("babyai_3", 0),
        ("babyai_3", 1),
        ("babyai_5", 0),
        ("babyai_5", 1),
    ]
    for episode in episodes:
        assistant = [m for m in episode.messages if m["role"] == "assistant"]
        assert episode.status in ("turn_cap", "done") and len(assistant) == episode.turns <= 3
        assert all(m["content"].endswith("Action: turn left") for m in assistant)
        assert not episode.success and episode.reward <= 0.0  # turning in place solves nothing
    assert len(replies) == sum(e.turns for e in episodes)

    async def give_up(messages: list[dict[str, str]]) -> str:
        return "Action: no such action"

    [refused] = agentgym_rl.play(give_up, "babyai_7", turn_cap=2)
    assert refused.turns >= 1 and refused.status in ("turn_cap", "done", "env_failure")


@pytest.mark.process
def test_serve_an_env_class_of_ones_own_and_play_it() -> None:
    """`serve_env` takes an `Environment` subclass of an importable module: the server process
    imports it by reference; its `name` is what task ids carry."""
    from tests.api.guess_env import GuessEnvironment

    def reads_the_number(messages: list[dict[str, str]]) -> str:
        wanted = messages[-1]["content"].split("Say the number ")[1][0]
        return f"Action: {wanted}"

    with agentgym_rl.serve_env(GuessEnvironment) as addresses:
        tasks = ["guess_0", "guess_1", "guess_5"]
        right = agentgym_rl.play(reads_the_number, tasks, env_addresses={"guess": addresses})
        wrong = agentgym_rl.play(lambda m: "Action: 0", tasks, env_addresses={"guess": addresses})
    assert [(e.success, e.turns, e.status) for e in right] == [(True, 1, "done")] * 3
    assert [e.success for e in wrong] == [False] * 3

    class Local(GuessEnvironment):
        pass

    Local.__module__ = "__main__"
    with pytest.raises(ValueError, match="importable module"):
        agentgym_rl.serve_env(Local).__enter__()
