"""The supervisor with cheap real children (tests/supervise/standin.py and a real noop env
server): start order and readiness, a normal end, crash reports with the last log lines,
restarts, the SIGTERM order, SIGKILL escalation and no orphans."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from train_fixtures import train_config

from agentgym_rl.processes.child import Child
from agentgym_rl.supervise import ChildSpec, RunPlan, plan_run
from agentgym_rl.supervise.progress import ProgressView
from agentgym_rl.supervise.supervisor import Supervisor

pytestmark = pytest.mark.process

STANDIN = str(Path(__file__).with_name("standin.py"))


def standin(name: str, role: Any, order: Path, *flags: str, **ports: Any) -> ChildSpec:
    argv = [sys.executable, STANDIN, "--name", name, "--order", str(order), *flags]
    return ChildSpec(name, role, argv, " ".join(argv), **ports)


def _sigterm_once(ready: Path) -> None:
    """SIGTERM to this process (the supervisor's) once `ready` exists, from a thread."""

    def send() -> None:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=send, daemon=True).start()


def make_supervisor(
    train_data: dict[str, Any],
    tmp_path: Path,
    *,
    learn_flags: tuple[str, ...] = (),
    rollout_flags: tuple[str, ...] = (),
    real_env: bool = False,
    **train: Any,
) -> tuple[Supervisor, io.StringIO, Path]:
    """A supervisor over stand-ins (the plan's ports are kept, so readiness checks are real)."""
    plan: RunPlan = plan_run(train_config({**train_data, **train}))
    order = tmp_path / "order.txt"
    env = plan.envs[0]
    if not real_env:
        env = standin(
            env.name, "env", order, "--health", str(env.health_port), health_port=env.health_port
        )
    ports = plan.learn.listen_ports
    listen = [f"--listen={p}" for p in ports]
    metrics = Path(plan.learn_config.log_dir) / "metrics.jsonl"
    learn = standin(
        "learn", "learn", order, *listen, f"--metrics={metrics}", *learn_flags, listen_ports=ports
    )
    rollout = standin("rollout-0", "rollout", order, *rollout_flags)
    plan = dataclasses.replace(plan, envs=[env], learn=learn, rollouts=[rollout])
    out = io.StringIO()
    view = ProgressView(plan.learn_config.max_steps, Console(file=out, width=200))
    sup = Supervisor(plan, view)
    sup.poll_s = 0.05
    return sup, out, order


def test_normal_end_stops_the_rest_and_records_the_run(
    train_data: dict[str, Any], tmp_path: Path
) -> None:
    ready = tmp_path / "rollout.ready"
    sup, out, order = make_supervisor(
        train_data,
        tmp_path,
        learn_flags=("--steps=2", f"--after={ready}"),
        rollout_flags=(f"--ready={ready}",),
    )
    assert sup.run() == 0
    text = out.getvalue()
    assert "train: learner finished at step 2" in text
    assert order.read_text().splitlines() == ["rollout-0", "env-noop-0"]  # learner exited itself
    run = Path(train_data["run_dir"])
    (record,) = [json.loads(line) for line in (run / "run.jsonl").read_text().splitlines()]
    assert (record["outcome"], record["exit_code"], record["step"]) == ("finished", 0, 2)
    timeline = [
        json.loads(line)["step"] for line in (run / "timeline.jsonl").read_text().splitlines()
    ]
    assert timeline == [1, 2]
    for name in ("env-noop-0", "learn", "rollout-0"):
        assert (run / "logs" / f"{name}.log").read_text().startswith("=== ")


@pytest.mark.parametrize("learner_done", [True, False])
def test_rollout_servers_that_end_first_wait_for_a_saving_learner_only(
    train_data: dict[str, Any], tmp_path: Path, learner_done: bool
) -> None:
    """A sync run's rollout server exits 0 after its last group while the learner still saves
    that step: the run finishes when the learner exits. Ending before the learner's last step
    is a crash (the dataset ran out)."""
    ready, done = tmp_path / "rollout.ready", tmp_path / "learn.done"
    steps = train_data["learn"]["max_steps"]
    sup, out, _ = make_supervisor(
        train_data,
        tmp_path,
        learn_flags=(
            f"--steps={steps if learner_done else steps - 1}",
            f"--after={ready}",
            f"--done={done}",
            "--linger=1.5" if learner_done else "--linger=30",
        ),
        rollout_flags=(f"--ready={ready}", f"--exit-when={done}"),
    )
    assert sup.run() == (0 if learner_done else 1)
    text = out.getvalue()
    assert ("the learner is saving its last step" in text) is learner_done
    assert ("learner finished at step" in text) is learner_done
    assert ("ended before the learner's last step" in text) is not learner_done


def test_crash_is_reported_with_last_log_lines(train_data: dict[str, Any], tmp_path: Path) -> None:
    sup, out, order = make_supervisor(
        train_data, tmp_path, rollout_flags=("--crash=3", "--lines=45"), real_env=True
    )
    assert sup.run() == 1
    text = out.getvalue()
    log = Path(train_data["run_dir"]) / "logs" / "rollout-0.log"
    assert f"train: rollout-0 exited with code 3; last lines of {log}:" in text
    shown = [line for line in text.splitlines() if line.startswith("  | rollout-0 line")]
    assert shown == [f"  | rollout-0 line {i}" for i in range(15, 45)]
    assert order.read_text().splitlines() == ["learn"]  # then the real env server, in order
    assert not any(c.running() for c in (*sup.envs, sup.learn, *sup.rollouts))


def test_learner_crash_while_starting(train_data: dict[str, Any], tmp_path: Path) -> None:
    sup, out, _ = make_supervisor(train_data, tmp_path, learn_flags=("--crash=7", "--lines=2"))
    assert sup.run() == 1
    assert "train: learn exited with code 7 while starting" in out.getvalue()
    assert sup.rollouts[0].proc is None  # never started


def test_crashed_rollout_is_restarted_when_allowed(
    train_data: dict[str, Any], tmp_path: Path
) -> None:
    marker, ready = tmp_path / "crashed-once", tmp_path / "rollout.ready"
    sup, out, _ = make_supervisor(
        train_data,
        tmp_path,
        learn_flags=("--steps=10", f"--after={ready}"),  # finishes after the restart is up
        rollout_flags=("--crash=4", "--lines=1", f"--crash-once={marker}", f"--ready={ready}"),
        restart={"max_restarts": 1},
    )
    assert sup.run() == 0
    assert "train: rollout-0 exited with code 4; restart 1/1" in out.getvalue()
    assert sup.rollouts[0].restarts == 1


def test_sigterm_stops_in_order_escalates_and_leaves_no_orphans(
    train_data: dict[str, Any], tmp_path: Path
) -> None:
    grandchild, ready = tmp_path / "grandchild.pid", tmp_path / "rollout.ready"
    sup, out, order = make_supervisor(
        train_data,
        tmp_path,
        learn_flags=("--ignore-term",),
        rollout_flags=(f"--grandchild={grandchild}", f"--ready={ready}"),
        stop_grace_s=2.5,  # the stand-ins that heed SIGTERM do, even on a loaded machine
    )

    _sigterm_once(ready)
    t0 = time.monotonic()
    assert sup.run() == 143
    assert order.read_text().splitlines() == ["rollout-0", "learn", "env-noop-0"]
    assert "train: learn did not stop in time; killing it" in out.getvalue()
    assert sup.learn.poll() == -signal.SIGKILL
    pid = int(grandchild.read_text())
    assert (
        not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    )
    assert time.monotonic() - t0 < 30
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored


@pytest.mark.parametrize("last", [True, False])
def test_a_stop_during_the_last_step_records_the_run_finished(
    train_data: dict[str, Any], tmp_path: Path, last: bool
) -> None:
    """SIGTERM while the learner is in its last step: it finishes that step and exits 0, and
    the run is recorded finished (exit 0); one step short of the end it stays a SIGTERM."""
    ready = tmp_path / "rollout.ready"
    steps = train_data["learn"]["max_steps"]
    sup, out, _ = make_supervisor(
        train_data,
        tmp_path,
        learn_flags=(f"--finish-on-term={steps if last else steps - 1}",),
        rollout_flags=(f"--ready={ready}",),
    )

    _sigterm_once(ready)
    assert sup.run() == (0 if last else 143)
    run = Path(train_data["run_dir"])
    (record,) = [json.loads(line) for line in (run / "run.jsonl").read_text().splitlines()]
    want = ("finished", 0, steps) if last else ("SIGTERM", 143, steps - 1)
    assert (record["outcome"], record["exit_code"], record["step"]) == want
    assert ("learner finished its last step while stopping" in out.getvalue()) is last


def test_model_creation_may_outlast_the_startup_timeout(
    train_data: dict[str, Any], tmp_path: Path
) -> None:
    """`init-model` is a finite job that takes what the machine needs (minutes on a loaded box):
    only servers are held to `startup_timeout_s`."""
    ready = tmp_path / "rollout.ready"
    sup, out, _ = make_supervisor(
        train_data,
        tmp_path,
        learn_flags=("--steps=1", f"--after={ready}"),
        rollout_flags=(f"--ready={ready}",),
        startup_timeout_s=6.0,  # the servers' stand-ins start well inside it on a loaded machine
    )
    slow = [sys.executable, "-c", "import time; time.sleep(7.5)"]
    init = ChildSpec("init-model", "init", slow, " ".join(slow))
    sup.plan = dataclasses.replace(sup.plan, init=init)
    sup.init = Child(init, sup.log_dir)
    t0 = time.monotonic()
    assert sup.run() == 0, out.getvalue()
    assert time.monotonic() - t0 >= 7.5 and "train: learner finished at step 1" in out.getvalue()


@pytest.mark.parametrize(
    ("threads", "policy", "expected"),
    [
        (None, None, (max(1, (os.cpu_count() or 2) // 2), None)),  # cores of its own: it spins
        ("all", None, (os.cpu_count() or 2, "PASSIVE")),
        ("all", "ACTIVE", (os.cpu_count() or 2, "ACTIVE")),  # the user's policy wins
    ],
)
def test_the_learner_gets_its_threads_and_waits_passively_beside_the_engine(
    train_data: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    threads: Any,
    policy: str | None,
    expected: tuple[int, str | None],
) -> None:
    """`learner_threads` (half the cores, `all`) reaches the learner as OMP_NUM_THREADS; where
    its threads reach into the engines' cores they sleep at barriers (OMP_WAIT_POLICY=PASSIVE)
    unless the user set a policy."""
    if policy is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", policy)
    envs: dict[str, dict[str, str]] = {}

    def launch(spec: ChildSpec, log_dir: Path, env: dict[str, str]) -> Any:
        envs[spec.name] = env
        return None

    plan = plan_run(train_config({**train_data, "learner_threads": threads}))
    Supervisor(plan, ProgressView(1, Console(file=io.StringIO())), launch=launch)
    learn = envs[plan.learn.name]
    assert (int(learn["OMP_NUM_THREADS"]), learn.get("OMP_WAIT_POLICY")) == expected


@pytest.mark.parametrize("threads", [0, "some"])
def test_learner_threads_refuses_what_is_neither_a_count_nor_all(
    train_data: dict[str, Any], threads: Any
) -> None:
    with pytest.raises(ValueError, match="learner_threads"):
        train_config({**train_data, "learner_threads": threads})
