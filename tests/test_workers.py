"""How the suite is shared between workers (`workers.py`): the units kept whole."""

from __future__ import annotations

from workers import unit_of


def test_a_file_is_its_own_unit() -> None:
    assert unit_of("tests/rollout/test_engine.py::test_x[a]") == "tests/rollout/test_engine.py"


def test_the_cluster_folder_is_one_unit() -> None:
    slurm = unit_of("tests/cluster/test_slurm_launch.py::test_x")
    assert slurm == unit_of("tests/cluster/test_ray_launch.py::test_y") == "tests/cluster/"


def test_the_smollm2_files_share_one_unit_and_its_conversion() -> None:
    converted = unit_of("tests/policy_creation/test_pretrained.py::test_x")
    assert converted == unit_of("tests/policy_creation/test_smollm2_stack.py::test_y")
    assert unit_of("tests/policy_creation/test_factory.py::test_z") != converted
