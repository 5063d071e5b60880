"""SLURM's compressed host lists, expanded as `scontrol show hostnames` expands them."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from agentgym_rl.cluster.hostlist import expand_hostlist

CASES = {
    "gpu[01-03,07]": ["gpu01", "gpu02", "gpu03", "gpu07"],
    "node1": ["node1"],
    "a[1-2],b,c[10-11]": ["a1", "a2", "b", "c10", "c11"],
    "n[08-10]": ["n08", "n09", "n10"],
    "rack[1-2]-n[1-2]": ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"],
    "gpu-[9-11]": ["gpu-9", "gpu-10", "gpu-11"],
    "x[7]": ["x7"],
}


@pytest.mark.parametrize("listed", CASES)
def test_expands_like_scontrol(listed: str) -> None:
    assert expand_hostlist(listed) == CASES[listed]


@pytest.mark.parametrize(
    "bad, why",
    [
        ("", "empty"),
        ("gpu[01-03", "brackets"),
        ("gpu[a-b]", "not a number"),
        ("gpu[5-3]", "backwards"),
        ("a,,b", "empty host name"),
    ],
)
def test_a_malformed_list_names_the_problem(bad: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        expand_hostlist(bad)


@pytest.mark.process
def test_agrees_with_scontrol_itself(slurm_cluster: Any) -> None:
    # `scontrol show hostnames` expands lists locally but needs a slurm.conf to start
    for listed, hosts in CASES.items():
        done = subprocess.run(
            ["scontrol", "show", "hostnames", listed],
            capture_output=True,
            text=True,
            timeout=30,
            env=slurm_cluster.env,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == hosts == expand_hostlist(listed)
