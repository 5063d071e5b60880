"""A run planned on a cluster's nodes: servers bind every interface and are reached at their
hosts, ports come from the job's block, processes spread over their role's nodes, and the
batch script `launch --slurm` writes asks for what the config says."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentgym_rl.cluster.slurm_job import JobError, role_nodes, srun_launch
from agentgym_rl.cluster.slurm_script import batch_script
from agentgym_rl.config.cluster import ClusterConfig
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.processes.ports import JobPorts, free_port
from agentgym_rl.supervise import plan_run
from agentgym_rl.supervise.placement import Placement

ROOT = Path(__file__).resolve().parents[2]
SPLIT = ROOT / "envs" / "agentgym_envs" / "babyai" / "data" / "train.json"


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Any]:
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (model / name).write_text("{}")
    return {
        "run_dir": str(tmp_path / "run"),
        "model": str(model),
        "env_servers": [{"env": "noop", "replicas": 3}],
        "rollout_servers": 4,
        "learner_procs": 4,
        "groups_per_step": 4,
        "rollout": {"dataset": {"env": "noop", "split": str(SPLIT), "group_size": 2}},
        "learn": {"max_steps": 2, "optimizer": {"warmup_steps": 0}},
        "cluster": {
            "learner": {"nodes": 2, "gpus_per_node": 2},
            "rollout": {"nodes": 2, "gpus_per_node": 2},
            "env": {"nodes": 2},
        },
    }


def _placed(data: dict[str, Any]) -> Any:
    train = TrainConfig.model_validate(data)
    placement = Placement.spread(
        ["cpu1", "cpu2"],
        ["infer1", "infer2"],
        ["train1", "train2"],
        rollout_servers=train.rollout_servers,
        rollout_gpus_per_node=2,
    )
    return plan_run(train, placement=placement, ports=JobPorts(20000, 64))


def test_processes_spread_over_their_roles_nodes(data: dict[str, Any]) -> None:
    plan = _placed(data)
    assert [c.host for c in plan.envs] == ["cpu1", "cpu2", "cpu1"]
    assert all("--host" in c.argv and "0.0.0.0" in c.argv for c in plan.envs)
    assert [c.host for c in plan.rollouts] == ["infer1", "infer1", "infer2", "infer2"]
    assert [c.env["CUDA_VISIBLE_DEVICES"] for c in plan.rollouts] == ["0", "1", "0", "1"]
    learn = plan.learn
    assert learn.hosts == ("train1", "train2") and learn.host == "train1"
    assert "--nnodes=2" in learn.argv and "--nproc_per_node=2" in learn.argv
    rdzv = next(a for a in learn.argv if a.startswith("--rdzv_endpoint="))
    assert rdzv.startswith("--rdzv_endpoint=train1:")


def test_servers_bind_everywhere_and_are_reached_at_their_hosts(data: dict[str, Any]) -> None:
    plan = _placed(data)
    learn = plan.learn_config
    assert learn.receive.bind.startswith("tcp://0.0.0.0:")
    rollout = plan.rollout_configs[0]
    port = learn.receive.bind.rsplit(":", 1)[1]
    assert rollout.learner.endpoints == [f"tcp://train1:{port}"]
    assert rollout.weights_endpoint is not None and rollout.weights_endpoint.startswith(
        "tcp://train1:"
    )
    hosts = [a.split("//")[1].split(":")[0] for a in rollout.envs[0].addresses]
    assert hosts == ["cpu1", "cpu2", "cpu1"]
    ports = [int(a.rsplit(":", 1)[1]) for a in rollout.envs[0].addresses]
    assert all(20000 <= p < 20064 for p in ports)
    assert len(set(ports)) == 3


def test_job_ports_differ_between_jobs_and_stay_in_their_block() -> None:
    a, b = JobPorts.for_job(101, 12000, 64), JobPorts.for_job(102, 12000, 64)
    assert a.base != b.base and abs(a.base - b.base) >= 64
    taken = [a.free() for _ in range(64)]
    assert taken == list(range(a.base, a.base + 64)) and not a.errors
    a.free()
    assert a.errors and "ports_per_job" in a.errors[0]


def test_job_ports_skip_a_port_busy_on_this_node() -> None:
    ports = JobPorts(free_port(), 64)
    with socket.socket() as held:
        held.bind(("127.0.0.1", ports.base + 1))
        held.listen()
        taken = [ports.free() for _ in range(3)]
    assert ports.base + 1 not in taken
    assert taken[0] == ports.base and taken[1:] == [ports.base + 2, ports.base + 3]


def test_counts_that_do_not_fit_the_nodes_are_refused(data: dict[str, Any]) -> None:
    data["learner_procs"] = 3
    data["cluster"]["rollout"]["gpus_per_node"] = 1
    with pytest.raises(ValueError) as info:
        TrainConfig.model_validate(data)
    text = str(info.value)
    assert "cluster.learner.nodes" in text and "divide evenly" in text
    assert "cluster.rollout.gpus_per_node" in text


def test_role_nodes_from_a_het_job_and_from_one_allocation() -> None:
    cluster = ClusterConfig.model_validate(
        {"learner": {"nodes": 2}, "rollout": {"nodes": 1}, "env": {"nodes": 1}}
    )
    het = {
        "SLURM_JOB_NODELIST_HET_GROUP_0": "gpu[01-02]",
        "SLURM_JOB_NODELIST_HET_GROUP_1": "gpu07",
        "SLURM_JOB_NODELIST_HET_GROUP_2": "cpu1",
    }
    assert role_nodes(het, cluster) == {
        "learner": ["gpu01", "gpu02"],
        "rollout": ["gpu07"],
        "env": ["cpu1"],
    }
    one = {"SLURM_JOB_NODELIST": "n[1-4]"}
    assert role_nodes(one, cluster) == {"learner": ["n1", "n2"], "rollout": ["n3"], "env": ["n4"]}
    with pytest.raises(JobError, match="asks for 4"):
        role_nodes({"SLURM_JOB_NODELIST": "n[1-3]"}, cluster)
    with pytest.raises(JobError, match="inside a job"):
        role_nodes({}, cluster)


def test_srun_steps_run_on_their_hosts_in_their_component(data: dict[str, Any]) -> None:
    plan = _placed(data)
    child = srun_launch(het_job=True)(plan.rollouts[2], Path("logs"), {})
    argv = child.spec.argv
    assert argv[:2] == ["srun", "--het-group=1"]
    assert "--nodelist=infer2" in argv and "--overlap" in argv
    assert "--job-name=rollout-2@0" in argv
    assert argv[argv.index("--export=ALL") + 1 :] == plan.rollouts[2].argv
    learn = srun_launch(het_job=False)(plan.learn, Path("logs"), {}).spec.argv
    assert "--nodes=2" in learn and "--nodelist=train1,train2" in learn
    assert not any(a.startswith("--het-group") for a in learn)


def test_the_batch_script_asks_for_each_roles_nodes(data: dict[str, Any]) -> None:
    data["cluster"]["slurm"] = {
        "partition": "gpu",
        "account": "lab",
        "time": "2:00:00",
        "extra": ["--qos=high"],
        "setup": ["module load cuda"],
    }
    train = TrainConfig.model_validate(data)
    script = batch_script(train, python="/venv/bin/python")
    components = script.split("#SBATCH hetjob")
    assert len(components) == 3
    for part in components:
        assert "#SBATCH --partition=gpu" in part and "#SBATCH --account=lab" in part
        assert "#SBATCH --time=2:00:00" in part and "#SBATCH --qos=high" in part
    assert "#SBATCH --gpus-per-node=2" in components[0] and "--nodes=2" in components[0]
    assert "--gpus-per-node" not in components[2]
    assert "#SBATCH --signal=B:USR1@300" in components[0] and "--requeue" in components[0]
    assert script.index("module load cuda") < script.index("exec /venv/bin/python -m")
    assert script.rstrip().endswith(f"job --slurm {train.run_dir.resolve()}")
    data["cluster"]["slurm"]["het_job"] = False
    one = batch_script(TrainConfig.model_validate(data))
    assert "hetjob" not in one and "#SBATCH --nodes=6" in one


@pytest.mark.process
def test_launch_dry_run_writes_the_script_and_submits_nothing(
    data: dict[str, Any], tmp_path: Path
) -> None:
    config = tmp_path / "train.yaml"
    config.write_text(json.dumps(data))
    done = subprocess.run(
        [sys.executable, "-m", "agentgym_rl.cli", "launch", "--slurm", "--dry-run", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    run_dir = Path(data["run_dir"])
    assert (run_dir / "launch" / "job.sbatch").is_file()
    assert (run_dir / "configs" / "train.yaml").is_file()
    assert json.loads((run_dir / "launch.json").read_text())["job_id"] is None
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentgym_rl.cli",
            "launch",
            "--slurm",
            "--dry-run",
            str(config),
            "learner_procs=3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "divide evenly" in bad.stderr


@pytest.mark.process
def test_a_submission_without_its_scheduler_is_one_line_and_writes_nothing(
    data: dict[str, Any], tmp_path: Path
) -> None:
    """`launch --slurm` where sbatch is not on PATH, `launch --ray` to an address nobody
    answers: exit 2, one line saying what to do, and no run folder left behind."""
    import os
    import shutil

    from agentgym_rl.processes.ports import free_port

    config = tmp_path / "train.yaml"
    config.write_text(json.dumps(data))
    no_slurm = os.pathsep.join(
        d for d in os.environ["PATH"].split(os.pathsep) if not Path(d, "sbatch").exists()
    )
    cases = [
        (["--slurm"], {**os.environ, "PATH": no_slurm}, "sbatch not found on PATH"),
        (
            ["--ray", f"http://127.0.0.1:{free_port()}"],
            dict(os.environ),
            "no Ray dashboard answers" if shutil.which("ray") else "ray command is not found",
        ),
    ]
    for flags, env, says in cases:
        done = subprocess.run(
            [sys.executable, "-m", "agentgym_rl.cli", "launch", *flags, str(config)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and says in lines[0], done.stderr
        assert not Path(data["run_dir"]).exists()  # refused before anything was written
