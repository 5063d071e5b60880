"""Fixtures of the cluster tests: clusters started by the test session."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .ray_cluster import RayCluster, ray_missing, start_ray_cluster
from .slurm_cluster import ClusterUnavailable, SlurmCluster


# package scope: the clusters' daemons stop once tests/cluster is done instead of idling (a
# Ray head is ~20 processes) beside the rest of the suite
@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[RayCluster]:
    """A local Ray head node (2 CPUs, 2 declared GPUs, `env_host: 2`, dashboard with the job
    and state APIs) for the cluster tests; skips where Ray is not installed. At teardown the
    node is shut down and the teardown fails if any of its processes (workers, actors, their
    children included) had to be killed."""
    missing = ray_missing()
    if missing:
        pytest.skip(missing)
    # short: Ray's unix sockets live under it (108 bytes at most for a socket path)
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    cluster = start_ray_cluster(temp_dir / "t", log_path=temp_dir / "start.log")
    try:
        yield cluster
    finally:
        left = cluster.stop()
    assert not left, "processes of the Ray cluster outlived its shutdown:\n" + "\n".join(left)
    # a failed teardown keeps the session's logs under temp_dir
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="package")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A real SLURM cluster on this host (`slurm_cluster.py`: private munged, slurmctld, one
    slurmd per node) for the cluster tests; skips, saying why, where it cannot start (not root,
    Slurm or munge not installed, a daemon that fails). At teardown its jobs are cancelled,
    its daemons stopped, and the teardown fails if any of its processes outlived that."""
    cluster = SlurmCluster()
    try:
        cluster.start()
    except ClusterUnavailable as e:
        pytest.skip(f"no SLURM cluster: {e}")
    try:
        yield cluster
    finally:
        left = cluster.stop()
    assert not left, "processes of the SLURM cluster outlived its shutdown:\n" + "\n".join(left)


@pytest.fixture(scope="session")
def tiny_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny created policy the launch tests train (made once for the session)."""
    from agentgym_rl.policy_creation import create_tiny_model
    from vllm_fixtures import tiny_corpus

    out = tmp_path_factory.mktemp("policy") / "tiny"
    return create_tiny_model(out, corpus=tiny_corpus(), vocab_size=320, seed=0)
