"""`train` planning: the composed per-process configs, and every start-up check failing before
anything starts (key path, reason, fix)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from train_fixtures import SPLIT, train_config

from agentgym_rl.config import RolloutConfig, load_learn_config, load_rollout_config
from agentgym_rl.config.loader import ConfigError, format_errors, load_config
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.supervise import PlanError, plan_run, write_plan
from agentgym_rl.supervise.run import run_plan
from cli_run import agentgym_cli


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(PlanError) as info:
        plan_run(train_config(data))
    return info.value.problems


@pytest.fixture
def listening() -> Iterator[int]:
    """A port something listens on for the duration of the test."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_composes_wired_configs_for_every_process(train_data: dict[str, Any]) -> None:
    train_data["env_servers"] = [
        {"env": "noop", "replicas": 2},
        {"env": "babyai", "transport": "http", "args": ["--idle-timeout", "60"]},
    ]
    train_data["rollout_servers"] = 2
    train_data["rollout"]["engine"] = {"temperature": 0.7, "seed": 5}
    train_data["rollout"]["envs"] = [{"env": "noop", "max_inflight": 3}]
    train_data["groups_per_step"] = 4
    plan = plan_run(train_config(train_data))
    run = Path(train_data["run_dir"])

    learn = plan.learn_config
    assert learn.temperature == 0.7 and learn.groups_per_step == 4
    assert learn.log_dir == run / "learn" and learn.checkpoint.dir == run / "checkpoints"
    assert learn.weights is not None
    receive_port = int(learn.receive.bind.rsplit(":", 1)[1])
    weights_port = int(learn.weights.endpoint.rsplit(":", 1)[1])
    assert plan.learn.listen_ports == (receive_port, weights_port)

    zmq_ports = [int(c.argv[c.argv.index("--zmq-port") + 1]) for c in plan.envs[:2]]
    assert [c.name for c in plan.envs] == ["env-noop-0", "env-noop-1", "env-babyai-0"]
    assert "--zmq-port" not in plan.envs[2].argv and plan.envs[2].argv[-2:] == [
        "--idle-timeout",
        "60",
    ]
    for i, rollout in enumerate(plan.rollout_configs):
        noop, babyai = rollout.env_servers("noop"), rollout.env_servers("babyai")
        assert noop.addresses == [f"tcp://127.0.0.1:{p}" for p in zmq_ports]
        assert noop.max_inflight == 3  # the config's own entry keeps its options
        assert babyai.addresses == [f"http://127.0.0.1:{plan.envs[2].health_port}"]
        assert rollout.learner.endpoints == [f"tcp://127.0.0.1:{receive_port}"]
        assert rollout.weights_endpoint == f"tcp://127.0.0.1:{weights_port}"
        assert rollout.learner.sender_id == f"rollout-{i}"
        assert rollout.log_dir == run / f"rollout-{i}"
        assert (rollout.engine.seed, rollout.dataset.shuffle_seed) == (5 + i, i)
        assert rollout.buffer.groups_per_step == 4 and not rollout.dataset.resume
    ports = [receive_port, weights_port, *zmq_ports, *(c.health_port for c in plan.envs)]
    assert len(set(ports)) == len(ports)

    configs = write_plan(plan)
    assert load_learn_config(configs / "learn.yaml") == learn
    assert load_rollout_config(configs / "rollout-1.yaml") == plan.rollout_configs[1]
    saved = load_config(TrainConfig, configs / "train.yaml")  # learner endpoints: free ports
    assert saved.learn.receive.bind == saved.learn.weights.endpoint == "tcp://127.0.0.1:0"
    unpinned = {"receive": {"bind": ...}, "weights": {"endpoint": ...}}
    assert saved.model_dump(exclude={"learn": unpinned}) == plan.train.model_dump(
        exclude={"learn": unpinned}
    )
    commands = (configs / "commands.sh").read_text().splitlines()
    assert commands[2].startswith("agentgym-rl env serve noop --port")
    assert commands[-1] == f"agentgym-rl serve-rollouts --config {configs / 'rollout-1.yaml'} &"


def test_resume_and_torchrun(train_data: dict[str, Any]) -> None:
    train_data["learner_procs"] = 2
    train_data["groups_per_step"] = 2
    plan = plan_run(train_config(train_data), resume=True)
    assert plan.learn_config.parallel.dp == 2  # filled in from learner_procs
    assert plan.learn.argv[1:5] == [
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
    ]
    assert plan.learn.argv[-1] == "--resume"
    assert all(r.dataset.resume for r in plan.rollout_configs)


def test_resuming_a_finished_run_starts_nothing_and_says_what_would_continue_it(
    train_data: dict[str, Any],
) -> None:
    """A run whose newest complete checkpoint is at learn.max_steps has nothing left: `run_plan`
    returns 0 at once, starts no child and says so (before, its rollout servers waited the final
    eval timeout on weights no learner sent); a final eval not on record is named."""
    train_data["rollout"]["eval"] = {"split": str(SPLIT), "every_versions": 1}
    run = Path(train_data["run_dir"])
    said: list[str] = []

    def resumed() -> int:
        said.clear()
        return run_plan(
            plan_run(train_config(train_data), resume=True), resume=True, say=said.append
        )

    (run / "checkpoints" / "step_2").mkdir(parents=True)
    (run / "checkpoints" / "step_2" / "COMPLETE").touch()
    assert resumed() == 0
    assert "already finished at step 2 (learn.max_steps 2)" in said[0]
    assert "final held-out eval of rollout-0 is not on record" in said[0]
    (run / "rollout-0").mkdir()
    (run / "rollout-0" / "eval.jsonl").write_text('{"version": 0}\n{"version": 2}\n')
    assert resumed() == 0
    assert "not on record" not in said[0] and "learn.max_steps=3" in said[0]
    assert not (run / "run.jsonl").exists() and not (run / "children.jsonl").exists()


def test_sync_mode_is_the_reference_regime(train_data: dict[str, Any]) -> None:
    train_data["mode"] = "sync"
    train_data["env_servers"] = [{"env": "noop", "replicas": 2}]  # zmq servers, HTTP clients
    train_data["max_staleness"] = 2
    plan = plan_run(train_config(train_data))
    [rollout] = plan.rollout_configs
    http_ports = [c.argv[c.argv.index("--port") + 1] for c in plan.envs]
    assert rollout.envs[0].addresses == [f"http://127.0.0.1:{p}" for p in http_ports]
    assert plan.rollouts[0].argv[-1] == "--sync" and plan.rollouts[0].shell.endswith("--sync")
    assert rollout.buffer.max_staleness == 0 and plan.learn_config.max_staleness == 0
    train_data["rollout_servers"] = 2
    [problem] = problems(train_data)
    assert problem.startswith("rollout_servers: 2, but mode sync")


def test_held_out_eval_ends_at_the_learners_last_step(train_data: dict[str, Any]) -> None:
    if "eval" not in RolloutConfig.model_fields:
        pytest.skip("this rollout config has no held-out eval")
    train_data["rollout"]["eval"] = {"split": str(SPLIT), "every_versions": 1}
    plan = plan_run(train_config(train_data))
    assert plan.has_eval
    assert plan.configs["rollout-0.yaml"]["eval"]["final_version"] == 2  # learn.max_steps
    train_data["rollout"]["eval"]["final_version"] = 1
    assert (
        plan_run(train_config(train_data)).configs["rollout-0.yaml"]["eval"]["final_version"] == 1
    )


def test_pinned_ports_are_used(train_data: dict[str, Any], free_port: int) -> None:
    train_data["learn"]["receive"] = {"bind": f"tcp://*:{free_port}"}
    plan = plan_run(train_config(train_data))
    assert plan.learn_config.receive.bind == f"tcp://*:{free_port}"
    assert plan.rollout_configs[0].learner.endpoints == [f"tcp://127.0.0.1:{free_port}"]


def test_a_saved_run_config_still_plans_free_learner_ports(
    train_data: dict[str, Any], free_port: int
) -> None:
    """`configs/train.yaml` (what `--resume` and a cluster job plan from) keeps a default
    learner endpoint a free port: read back, it used to pin 5555 and 5557, so a resumed run
    failed to bind beside any other run on the node."""
    plan = plan_run(train_config(train_data))
    saved = TrainConfig.from_yaml(write_plan(plan) / "train.yaml")
    replanned = plan_run(saved).learn_config
    assert replanned.weights is not None
    ports = {e.rsplit(":", 1)[1] for e in (replanned.receive.bind, replanned.weights.endpoint)}
    assert ports.isdisjoint({"5555", "5557", "0"}), ports

    train_data["learn"]["receive"] = {"bind": f"tcp://127.0.0.1:{free_port}"}  # pinned: kept
    saved = TrainConfig.from_yaml(write_plan(plan_run(train_config(train_data))) / "train.yaml")
    assert plan_run(saved).learn_config.receive.bind == f"tcp://127.0.0.1:{free_port}"


def invalid(data: dict[str, Any]) -> list[str]:
    """The lines of the error a train config gets before anything is planned."""
    with pytest.raises(ValidationError) as info:
        train_config(data)
    return [line.strip() for line in format_errors(info.value).splitlines()[1:]]


def test_unknown_keys_name_their_path(train_data: dict[str, Any]) -> None:
    train_data["rollout"]["engine"] = {"temprature": 0.5}
    train_data["learn"]["optimizer"]["lr_max"] = 1.0
    train_data["init_model"] = {"hiden": 64}
    found = invalid(train_data)
    assert "rollout.engine.temprature: Extra inputs are not permitted" in found
    assert "learn.optimizer.lr_max: Extra inputs are not permitted" in found
    assert "init_model.hiden: Extra inputs are not permitted" in found
    with pytest.raises(ConfigError, match="rollout_server: Extra inputs are not permitted"):
        load_config(TrainConfig, None, ["model=m", "env_servers=[{env: noop}]", "rollout_server=2"])


def test_wrong_types_name_their_path(train_data: dict[str, Any]) -> None:
    train_data["learn"]["max_steps"] = "many"
    train_data["max_staleness"] = -1
    train_data["init_model"] = {"layers": 0}
    found = invalid(train_data)
    assert (
        "learn.max_steps: Input should be a valid integer, unable to parse string as an integer"
        in found
    )
    assert "max_staleness: Input should be greater than or equal to 0" in found
    assert "init_model.layers: Input should be greater than or equal to 1" in found
    with pytest.raises(ValueError, match="rollout_servers"):
        train_config({**train_data, "rollout_servers": 0})


def test_impossible_sizes(train_data: dict[str, Any]) -> None:
    train_data["learner_procs"] = 2
    train_data["learn"]["parallel"] = {"dp": 1}
    (found,) = problems(train_data)
    assert found.startswith("learner_procs: 2 ranks, but learn.parallel has tp=1 pp=1 dp=1")
    assert "set learner_procs=1" in found
    del train_data["learn"]["parallel"]
    train_data["groups_per_step"] = 3
    (found,) = problems(train_data)
    assert found == "learn: groups_per_step (3) must be a multiple of parallel.dp (2)"


def test_shared_values_are_stated_once(train_data: dict[str, Any]) -> None:
    train_data["rollout"]["engine"] = {"temperature": 0.6}
    train_data.update(groups_per_step=4, max_staleness=1)
    plan = plan_run(train_config(train_data))
    learn, [rollout] = plan.learn_config, plan.rollout_configs
    assert (learn.temperature, rollout.engine.temperature) == (0.6, 0.6)
    assert (learn.groups_per_step, rollout.buffer.groups_per_step) == (4, 4)
    assert (learn.max_staleness, rollout.buffer.max_staleness) == (1, 1)
    train_data["learn"]["temperature"] = 0.5
    train_data["rollout"]["buffer"] = {"max_staleness": 2, "max_ready": 8}
    train_data["rollout"]["envs"] = [{"env": "noop", "addresses": ["tcp://127.0.0.1:1"]}]
    assert invalid(train_data) == [
        "rollout.buffer.max_staleness: train fills this in (from max_staleness); leave it out",
        "rollout.envs.0.addresses: train fills this in (from env_servers); leave it out",
        "learn.temperature: train fills this in (from rollout.engine.temperature); leave it out",
    ]


def test_an_env_described_but_not_served(train_data: dict[str, Any]) -> None:
    train_data["rollout"]["envs"] = [{"env": "babyai"}]
    (found,) = problems(train_data)
    assert found == "rollout.envs.0.env: 'babyai' has no env_servers entry; serve it or drop it"


def test_busy_pinned_port_names_key_and_fix(train_data: dict[str, Any], listening: int) -> None:
    train_data["learn"]["receive"] = {"bind": f"tcp://127.0.0.1:{listening}"}
    train_data["env_servers"][0]["http_ports"] = [listening]
    found = problems(train_data)
    assert len(found) == 2
    assert found[0].startswith(f"env_servers.0.http_ports.0: port {listening} is already in use")
    assert found[1].startswith(f"learn.receive.bind: port {listening} is used twice in this run")
    del train_data["env_servers"][0]["http_ports"]
    (found_alone,) = problems(train_data)
    assert f"learn.receive.bind: port {listening} is already in use" in found_alone
    assert "set learn.receive.bind=tcp://127.0.0.1:0 to choose a free port" in found_alone


def test_missing_model_unless_init_model(train_data: dict[str, Any], tmp_path: Path) -> None:
    train_data["model"] = str(tmp_path / "nope")
    (found,) = problems(train_data)
    assert found.startswith(f"model: model directory '{tmp_path / 'nope'}' not found")
    assert "init_model" in found
    train_data["init_model"] = {
        "env": "babyai",
        "warmup_steps": 10,
        "warmup_observation_weight": 0.1,
        "env_options": ["topk=2", "end_on_wrong=true"],
        "phrase_tokens": False,
    }
    plan = plan_run(train_config(train_data))
    assert plan.init is not None
    # the flags of what the section sets; a switch is --flag or --no-flag, a list a repeated flag
    assert plan.init.argv[-14:] == [
        "init-model",
        "--out",
        str(tmp_path / "nope"),
        "--env",
        "babyai",
        "--env-option",
        "topk=2",
        "--env-option",
        "end_on_wrong=true",
        "--no-phrase-tokens",
        "--warmup-steps",
        "10",
        "--warmup-observation-weight",
        "0.1",
    ]


def test_a_context_the_created_model_cannot_hold_is_refused_before_creating_it(
    train_data: dict[str, Any], tmp_path: Path
) -> None:
    train_data["model"] = str(tmp_path / "to-create")
    train_data["init_model"] = {"env": "babyai"}
    train_data.setdefault("rollout", {}).setdefault("engine", {})["max_model_len"] = 4096
    (found,) = problems(train_data)
    assert found.startswith("rollout.engine.max_model_len: 4096 is larger than the context")
    train_data["rollout"]["engine"]["max_model_len"] = 2048
    assert plan_run(train_config(train_data)).init is not None


def test_missing_env_dependency(
    train_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentgym_envs
    from agentgym_envs.noop import NoopEnvironment

    monkeypatch.setattr(NoopEnvironment, "needs", {"no-such-jre": "install a JRE"})
    train_data["env_servers"] += [{"env": "agentgym_envs.not_installed:X"}, {"env": "webshop"}]
    found = problems(train_data)
    known = ", ".join(agentgym_envs.entries())
    assert found[:3] == [
        "env_servers.0.env: environment 'noop' needs `no-such-jre` on PATH: install a JRE",
        "env_servers.1.env: env 'agentgym_envs.not_installed:X' cannot be loaded from "
        "agentgym_envs.not_installed:X: it needs the module 'agentgym_envs.not_installed', not "
        "installed here. Install its dependencies (`pip install agentgym-envs` "
        "installs those of the built-in envs; an env with heavy needs has an extra, e.g. "
        "`pip install 'agentgym-envs[sciworld]'`)",
        f"env_servers.2.env: unknown env 'webshop'; known: {known} (or give module:Class)",
    ]


@pytest.mark.process
def test_cli_bad_config_exits_2_before_starting(tmp_path: Path, train_data: dict[str, Any]) -> None:
    train_data["rollout"]["engine"] = {"temperature": "hot"}
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(train_data))
    out = agentgym_cli("train", "--config", str(path))
    assert out.returncode == 2, out.stderr
    assert "rollout.engine.temperature: Input should be a valid number" in out.stderr
    assert not Path(train_data["run_dir"]).exists()  # nothing was written or started


@pytest.mark.process
def test_cli_resume_needs_a_run_folder(tmp_path: Path) -> None:
    missing = agentgym_cli("train", "--resume", str(tmp_path))
    assert missing.returncode == 2
    assert f"{tmp_path / 'configs' / 'train.yaml'} not found" in missing.stderr
    both = agentgym_cli("train", "--config", "x.yaml", "--resume", str(tmp_path))
    assert both.returncode == 2 and "not both" in both.stderr


def test_a_new_run_refuses_a_folder_that_holds_a_run(train_data: dict[str, Any]) -> None:
    run_dir = Path(train_data["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    plan_run(train_config(train_data))  # an empty (or new) folder is fine
    (run_dir / "run.jsonl").write_text('{"outcome": "stopped"}\n')
    (found,) = problems(train_data)
    assert found.startswith(f"run_dir: {run_dir} already holds a run")
    assert f"agentgym-rl train --resume {run_dir}" in found
    plan_run(train_config(train_data), resume=True)  # continuing it is what --resume is for


def test_an_agent_section_reaches_every_rollout_server(train_data: dict[str, Any]) -> None:
    """`agent:` goes to each rollout server's config with the env servers' HTTP addresses (the
    pool still steps over ZeroMQ); the regimes it cannot run in are refused."""
    train_data["env_servers"] = [{"env": "noop", "replicas": 2}]
    train_data["agent"] = {"function": "examples.openai_agent:agent"}
    plan = plan_run(train_config(train_data))
    [rollout] = plan.rollout_configs
    http_ports = [c.argv[c.argv.index("--port") + 1] for c in plan.envs]
    assert rollout.agent is not None and rollout.agent.function == "examples.openai_agent:agent"
    assert rollout.agent.env_urls == {"noop": [f"http://127.0.0.1:{p}" for p in http_ports]}
    assert all(a.startswith("tcp://") for a in rollout.envs[0].addresses)
    train_data.update(mode="sync", rollout_servers=2)
    train_data["agent"]["port"] = 9000
    found = problems(train_data)
    assert any(p.startswith("agent: a user's agent runs in mode async only") for p in found)
    assert any(p.startswith("agent.port: 9000 for 2 rollout servers") for p in found)
    with pytest.raises(ValidationError, match="one of the two"):
        train_config({**train_data, "agent": {"function": "a:b", "command": ["x"]}})


AVX2_CPU = "processor\t: 0\nmodel name\t: Some EPYC\nflags\t\t: fpu sse2 avx avx2 fma\n"
BF16_CPU = "processor\t: 0\nmodel name\t: Some Xeon\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16\n"
ARM_CPU = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


def test_bf16_on_a_cpu_without_bf16_instructions_is_refused_with_each_key(
    train_data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentgym_rl.supervise import preflight

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(AVX2_CPU)
    monkeypatch.setattr(preflight.shutil, "which", lambda name: None)  # no nvidia-smi
    (found,) = preflight.bf16_problems({"learn.precision": "fp32"}, cpuinfo)
    assert found.startswith("learn.precision: bf16 on a CPU without bf16 instructions (Some EPYC")
    assert found.endswith("set learn.precision=fp32") and "AVX2" in found
    for cpu in (BF16_CPU, ARM_CPU):  # the instructions are there: nothing to say
        cpuinfo.write_text(cpu)
        assert preflight.bf16_problems({"learn.precision": "fp32"}, cpuinfo) == []
    assert preflight.bf16_problems({"learn.precision": "fp32"}, tmp_path / "none") == []
    cpuinfo.write_text(AVX2_CPU)
    monkeypatch.setattr(preflight.shutil, "which", lambda name: f"/usr/bin/{name}")  # a GPU
    assert preflight.bf16_problems({"learn.precision": "fp32"}, cpuinfo) == []

    # through the plan: every setting asking for bf16, each with the value that replaces it
    monkeypatch.setattr(preflight.shutil, "which", lambda name: None)
    real = preflight.cpu_flags
    monkeypatch.setattr(preflight, "cpu_flags", lambda path=cpuinfo: real(cpuinfo))
    train_data.setdefault("learn", {})["precision"] = "bf16"
    train_data["rollout"].setdefault("engine", {})["dtype"] = "bfloat16"
    found = [p for p in problems(train_data) if "bf16 instructions" in p]
    assert [p.split(":")[0] for p in found] == ["learn.precision", "rollout.engine.dtype"]
    assert found[1].endswith("set rollout.engine.dtype=float32")


def test_init_model_refuses_a_bf16_warm_up_there_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from agentgym_rl.commands import init_model
    from agentgym_rl.supervise import preflight

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(AVX2_CPU)
    real = preflight.cpu_flags
    monkeypatch.setattr(preflight, "cpu_flags", lambda path=cpuinfo: real(cpuinfo))
    monkeypatch.setattr(preflight.shutil, "which", lambda name: None)
    parser = argparse.ArgumentParser()
    init_model.add_arguments(parser)
    out = tmp_path / "model"
    args = parser.parse_args(["--out", str(out), "--env", "babyai", "--warmup-precision", "bf16"])
    assert init_model.run(args) == 2
    said = capsys.readouterr().out
    assert "--warmup-precision: bf16 on a CPU without bf16" in said and "=fp32" in said
    assert not out.exists()  # refused before anything was made
