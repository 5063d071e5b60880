"""`ProcessActor` / `RayChild` on a real local Ray cluster (`ray_cluster`): actors placed by
resource (`env_host`, a declared GPU), the child they start, its exit codes, the state API's
view of the actors, and what a stopped Ray job leaves behind (nothing: PDEATHSIG)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentgym_rl.cluster.ray_child import ACTOR_LOST, ProcessActor, RayChild
from agentgym_rl.processes.child import ChildSpec
from waiting import wait_until

from .ray_cluster import RayCluster, alive, cmdline, pids_matching

pytestmark = pytest.mark.process

SLEEP = ["sleep", "300"]


@pytest.fixture(scope="module")
def ray_driver(ray_cluster: RayCluster) -> Iterator[ModuleType]:
    """This test process as the cluster's driver (`ray.init(address=...)`). Ray installs its
    own SIGINT/SIGTERM handlers in a driver; they are put back after, so that later tests of
    this process see the handlers they expect."""
    import ray

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    ray.init(address=ray_cluster.address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _actor(ray: ModuleType, name: str, **options: Any) -> Any:
    return ray.remote(num_cpus=0)(ProcessActor).options(name=name, **options).remote()


def _child(name: str, tmp_path: Path, actor: Any, argv: list[str] | None = None) -> RayChild:
    spec = ChildSpec(name, "env", argv or SLEEP, " ".join(argv or SLEEP))
    return RayChild(spec, tmp_path / "logs", dict(os.environ), actor, call_timeout_s=30.0)


def test_actors_placed_by_resource_start_watch_and_terminate_a_child(
    ray_cluster: RayCluster, ray_driver: ModuleType, tmp_path: Path
) -> None:
    ray = ray_driver
    from ray.util.state import list_actors

    env_actor = _actor(ray, "env-noop-0", resources={"env_host": 1})
    gpu_actor = _actor(ray, "rollout-0", num_gpus=1)
    try:
        began = time.monotonic()
        children = [
            _child("env-noop-0", tmp_path, env_actor),
            _child("rollout-0", tmp_path, gpu_actor),
        ]
        for child in children:
            child.start()
        print(f"\ntwo actors up, children started: {time.monotonic() - began:.1f}s")
        for child in children:
            assert child.pid is not None and alive(child.pid)
            assert cmdline(child.pid) == "sleep 300"
            assert child.running() and child.poll() is None
            assert "start: sleep 300" in child.tail(5)[-1]

        # a GPU is declared, none exists: placed anyway, Ray hands out a device index
        gpu_env = ray.get(gpu_actor.environ.remote(), timeout=30)
        env_env = ray.get(env_actor.environ.remote(), timeout=30)
        print(
            f"CUDA_VISIBLE_DEVICES: num_gpus=1 actor {gpu_env.get('CUDA_VISIBLE_DEVICES')!r}, "
            f"env_host actor {env_env.get('CUDA_VISIBLE_DEVICES')!r}; OMP_NUM_THREADS "
            f"{gpu_env.get('OMP_NUM_THREADS')!r}; node_ip {ray.get(gpu_actor.node_ip.remote())}"
        )
        assert gpu_env.get("CUDA_VISIBLE_DEVICES") in {"0", "1"}
        child_env = Path(f"/proc/{children[1].pid}/environ").read_bytes().split(b"\0")
        assert f"CUDA_VISIBLE_DEVICES={gpu_env['CUDA_VISIBLE_DEVICES']}".encode() in child_env

        # the state API names them
        listed = list_actors(
            address=ray_cluster.dashboard_url, filters=[("state", "=", "ALIVE")], timeout=30
        )
        mine = {a.name: a.class_name for a in listed if a.name in ("env-noop-0", "rollout-0")}
        assert mine == {"env-noop-0": "ProcessActor", "rollout-0": "ProcessActor"}

        for child in children:
            child.terminate()
            assert child.wait(10.0) == -signal.SIGTERM
            assert not child.running()
        # a restart: the same actor, a new child
        first = children[0].pid
        children[0].start()
        assert children[0].pid != first and children[0].running()
        children[0].terminate()
        assert children[0].wait(5.0) == -signal.SIGTERM
    finally:
        for actor in (env_actor, gpu_actor):
            ray.kill(actor)


def test_a_child_killed_from_outside_reports_sigkill(
    ray_driver: ModuleType, tmp_path: Path
) -> None:
    ray = ray_driver
    actor = _actor(ray, "env-kill-0", resources={"env_host": 1})
    try:
        child = _child("env-kill-0", tmp_path, actor).start()
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        assert wait_until(lambda: child.poll(), 10.0, "the exit code") == -signal.SIGKILL
        assert child.wait(0.0) == -signal.SIGKILL
    finally:
        ray.kill(actor)


def test_a_killed_actor_takes_its_child_along(ray_driver: ModuleType, tmp_path: Path) -> None:
    ray = ray_driver
    actor = _actor(ray, "rollout-lost-0", num_gpus=1)
    child = _child("rollout-lost-0", tmp_path, actor).start()
    pid = child.pid
    assert pid is not None and alive(pid)
    began = time.monotonic()
    ray.kill(actor)  # the worker process dies: PDEATHSIG ends the child
    wait_until(lambda: not alive(pid), 15.0, f"child {pid} to die with its actor")
    print(f"\nray.kill(actor) -> child gone in {time.monotonic() - began:.1f}s")
    assert wait_until(lambda: child.poll() == ACTOR_LOST, 15.0, "the actor's death to show")
    assert child.lost is not None
    assert child.wait(1.0) == ACTOR_LOST
    assert "start: sleep 300" in child.tail(5)[-1]  # read from the (shared) file system
    child.terminate()  # a no-op, no error
    child.kill_group()


DRIVER = textwrap.dedent(
    """
    import json, os, sys, time
    import ray
    from agentgym_rl.cluster.ray_child import ProcessActor

    marker, log_dir = sys.argv[1], sys.argv[2]
    ray.init(logging_level="WARNING")
    actor = ray.remote(num_cpus=0)(ProcessActor)
    actors = [
        actor.options(name="env-noop-0", resources={"env_host": 1}).remote(),
        actor.options(name="rollout-0", num_gpus=1).remote(),
    ]
    argv = ["bash", "-c", f"exec -a {marker}-child sleep 300"]
    pids = [
        ray.get(a.start.remote(argv, {}, f"{log_dir}/child-{i}.log"), timeout=60)
        for i, a in enumerate(actors)
    ]
    seen = {
        "executable": sys.executable,
        "cwd": os.getcwd(),
        "pids": pids,
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "RAY_ADDRESS": os.environ.get("RAY_ADDRESS"),
        "VIRTUAL_ENV": os.environ.get("VIRTUAL_ENV"),
    }
    print("DRIVER " + json.dumps(seen), flush=True)
    time.sleep(600)
    """
)


def _job_info(cluster: RayCluster, job_id: str) -> tuple[str, str]:
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(cluster.dashboard_url)
    return str(client.get_job_status(job_id)), client.get_job_logs(job_id)


def _ray(cluster: RayCluster, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    ray_cli = Path(sys.executable).parent / "ray"
    return subprocess.run(
        [str(ray_cli), *args],
        env=cluster.env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_stopped_job_leaves_no_process(ray_cluster: RayCluster, tmp_path: Path) -> None:
    """A job's driver places two actors, each starts a child; `ray job stop` ends the driver,
    Ray kills the job's actors, the children get their PDEATHSIG: nothing is left."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    marker = f"agentgym-ray-{uuid.uuid4().hex[:12]}"
    job_id = f"test-{marker}"
    began = time.monotonic()
    submitted = _ray(
        ray_cluster,
        *("job", "submit", "--address", ray_cluster.dashboard_url, "--no-wait"),
        *("--submission-id", job_id, "--entrypoint-num-cpus", "0"),
        *("--", sys.executable, str(driver), marker, str(tmp_path)),
        cwd=tmp_path,
    )
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    submit_s = time.monotonic() - began

    def children_up() -> list[int]:
        status, logs = _job_info(ray_cluster, job_id)
        assert status not in ("FAILED", "STOPPED", "SUCCEEDED"), logs
        pids = pids_matching(f"{marker}-child") if "DRIVER " in logs else []
        # up once bash has exec'd them: before, bash's own command line holds the marker too
        return pids if all(cmdline(p) == f"{marker}-child 300" for p in pids) else []

    pids = wait_until(children_up, 120.0, "the job's children")
    up_s = time.monotonic() - began
    _, logs = _job_info(ray_cluster, job_id)
    seen = json.loads(next(x for x in logs.splitlines() if x.startswith("DRIVER "))[7:])
    print(f"\njob driver saw: {seen}")
    assert seen["executable"] == sys.executable  # this virtualenv's Python, nothing uploaded
    assert sorted(seen["pids"]) == sorted(pids)

    stop_began = time.monotonic()
    stopped = _ray(
        ray_cluster, "job", "stop", "--address", ray_cluster.dashboard_url, job_id, cwd=tmp_path
    )
    stop_cli_s = time.monotonic() - stop_began
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    wait_until(lambda: not pids_matching(f"{marker}-child"), 30.0, "the job's children to end")
    gone_s = time.monotonic() - stop_began
    status, _ = _job_info(ray_cluster, job_id)
    print(
        f"job submit CLI {submit_s:.1f}s, children up {up_s:.1f}s after submit; "
        f"`ray job stop` returned in {stop_cli_s:.1f}s, children gone {gone_s:.1f}s after it "
        f"began; status {status}"
    )
    assert status == "STOPPED"
    assert not pids_matching(marker), [cmdline(p) for p in pids_matching(marker)]
