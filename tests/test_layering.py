"""Import directions between the packages of agentgym_rl, checked on every module's source.

Every module under python/agentgym_rl is parsed with `ast`; each `agentgym_rl.*` import it makes
(at the top, inside a function or under TYPE_CHECKING alike) must be allowed by `LAYERS` for
the unit it lives in (a subpackage, or a top-level module). An entry is a unit (`episode`) or
one module of a unit (`unit.module`), for a narrow exception; there are none today. Command
modules (`cli.py` and `commands/`: the `agentgym-rl` subcommands) may import any
library unit; no library unit imports a command. A new unit must be placed in the table.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "python" / "agentgym_rl"
PACKAGE = "agentgym_rl"

LAYERS: dict[str, set[str]] = {
    "__init__": {
        "_core",
        "config",
        "episode",
        "evaluation",
        "processes",
        "runs",
        "supervise",
    },  # the API
    "auth": set(),
    "config": {"env_discovery"},  # defaults an env declares (its HTTP dialect)
    "env_discovery": set(),
    # the one toolkit for child processes: ports, specs and argv, start, readiness, stop
    "processes": set(),
    "trajectory": {"_core"},
    "wire": {"_core"},
    "weights": {"_core", "auth", "config"},
    "episode": {"_core", "config", "env_discovery", "trajectory", "wire"},
    "inference": {"config", "episode", "weights.peft"},  # adapters: PEFT's format
    # the OpenAI-compatible endpoint: the episode layer's engine contract and tool calls
    "gateway": {"_core", "episode", "processes", "trajectory", "wire"},
    # a judge model's rewards: what it reads of an episode, how it is asked and served (a local
    # judge's KV cache sized as an engine's)
    "judging": {"config", "episode", "inference.kv_cache", "processes", "wire"},
    "rollout": {
        "_core",
        "auth",
        "config",
        "env_discovery",
        "episode",
        "gateway",
        "inference",
        "judging",
        # a child whose supervisor died stops at once (its stop handler asks)
        "processes.orphans",
        "trajectory",
        "weights",
        "wire",
    },
    # a run's checkpoints are found where the learner writes them (eval --run)
    "evaluation": {
        "_core",
        "config",
        "env_discovery",
        "episode",
        "inference",
        "judging",
        "learner.checkpoint_dirs",
        "processes",
        "trajectory",
        "wire",
    },
    "learner": {"_core", "auth", "config", "processes.orphans", "weights", "wire"},
    "policy_creation": {"_core", "config", "env_discovery", "episode", "trajectory"},
    "report": {"_core", "config", "wire"},
    # live scalars of a run (TensorBoard, W&B), fed by the supervisor's watcher
    "metric_sinks": {"report"},
    # `show` and `view`: episodes as the model saw them, joined to what the learner trained
    # them with, beside the run's records (the page's overview)
    "viewer": {"episode", "learner.credit_log", "learner.token_log", "report", "trajectory"},
    # a resumed run already at its last checkpoint starts nothing (`train --resume`)
    "supervise": {
        "_core",
        "auth",
        "config",
        "env_discovery",
        "learner.checkpoint_dirs",
        "metric_sinks",
        "processes",
        "report",
        "wire",
    },
    # soak, chaos and compare, and the analyses across runs (seed bands, turn caps, regimes)
    "experiments": {"_core", "auth", "config", "processes", "report"},
    "runs": {"episode", "report"},
    # checks a user runs from the installed wheel: the learner on one GPU (on a random model, or
    # a pretrained base prepared as init-model prepares it)
    "checks": {"config", "learner", "policy_creation", "weights", "wire"},
    # a run on a cluster's scheduler: the supervisor over srun steps or Ray actors
    "cluster": {"auth", "config", "processes", "report", "supervise"},
}
"""Unit -> the units (or `unit.module`s) it may import, besides itself."""

KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()
"""(file, imported module) pairs tolerated for now; each names the work that removes it."""


def is_command(unit: str) -> bool:
    """A module behind an `agentgym-rl` subcommand (its argparse front or its process)."""
    return unit in {"cli", "commands"}


def unit_of(path: Path) -> str:
    """`episode/agent.py` -> `episode`; `cli.py` -> `cli`."""
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join((PACKAGE, *parts))


def is_module(dotted: str) -> bool:
    """A module or package of agentgym_rl (`_core` is known by its stub)."""
    rel = ROOT.joinpath(*dotted.split(".")[1:])
    return any(rel.with_suffix(s).is_file() for s in (".py", ".pyi")) or rel.is_dir()


def imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, dotted module) of every agentgym_rl import in `tree` (relative ones resolved;
    `from X import y` names `X.y` when that is a module of its own)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield node.lineno, full if is_module(full) else base


def target_units(dotted: str) -> tuple[str, str]:
    """`agentgym_rl.inference.engine.X` -> (`inference`, `inference.engine`)."""
    parts = dotted.split(".")[1:]
    unit = parts[0] if parts else "__init__"
    return unit, ".".join(parts[:2])


def violations(path: Path, source: str) -> list[str]:
    """One message per disallowed import of the module at `path` with this `source`."""
    unit, module = unit_of(path), module_of(path)
    tree = ast.parse(source, filename=str(path))
    rel = path.relative_to(ROOT).as_posix()
    found = []
    for line, dotted in imported(tree, module, path.name == "__init__.py"):
        if dotted != PACKAGE and not dotted.startswith(PACKAGE + "."):
            continue
        target, target_module = target_units(dotted)
        if is_command(unit) or target == unit or (rel, dotted) in KNOWN_EXCEPTIONS:
            continue
        where = f"python/agentgym_rl/{rel}:{line}: import of {dotted}"
        if is_command(target):
            found.append(f"{where}: library unit {unit!r} imports the command module {target!r}")
        elif target not in LAYERS[unit] and target_module not in LAYERS[unit]:
            allowed = ", ".join(sorted(LAYERS[unit])) or "nothing"
            found.append(f"{where}: {unit!r} may import only {allowed}")
    return found


def modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_every_unit_has_a_place_in_the_table() -> None:
    units = {unit_of(p) for p in modules()}
    unplaced = sorted(u for u in units if u not in LAYERS and not is_command(u))
    assert not unplaced, f"add these to LAYERS in tests/test_layering.py: {unplaced}"


def test_imports_follow_the_layers() -> None:
    found = [v for p in modules() for v in violations(p, p.read_text(encoding="utf-8"))]
    assert not found, "imports against the layering:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("file", "source", "expected"),
    [
        (
            "episode/agent.py",
            "def f():\n    from agentgym_rl.rollout.dispatcher import Dispatcher\n",
            "episode/agent.py:2: import of agentgym_rl.rollout.dispatcher: 'episode' may import "
            "only _core, config, env_discovery, trajectory, wire",
        ),
        (
            "evaluation/job.py",
            "from agentgym_rl.rollout import service\n",
            "evaluation/job.py:1: import of agentgym_rl.rollout.service",
        ),
        (
            "wire/codec.py",
            "import agentgym_rl.commands.serve_rollouts\n",
            "library unit 'wire' imports the command module 'commands'",
        ),
        ("episode/turn.py", "from ..rollout import sink\n", "agentgym_rl.rollout.sink"),
    ],
)
def test_a_violation_names_the_file_and_the_import(file: str, source: str, expected: str) -> None:
    (found,) = violations(ROOT / file, source)
    assert expected in found


def test_allowed_imports_pass() -> None:
    allowed = (
        "from agentgym_rl import _core\n"
        "from agentgym_rl.inference.engine import VllmEngine\n"
        "from agentgym_rl.episode.agent import AgentLoop\n"
        "from . import runner\n"
    )
    assert violations(ROOT / "evaluation" / "job.py", allowed) == []
    command = ROOT / "commands" / "evaluate.py"
    assert violations(command, "from agentgym_rl.rollout import service\n") == []


def test_no_module_imports_itself_through_others() -> None:
    """No circle of imports between modules (lazy ones included): each module can be read, and
    changed, after the ones it imports (the learner's checkpoint and trainer were one)."""
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        module = module_of(path)
        tree = ast.parse(path.read_text(), filename=str(path))
        found = imported(tree, module, path.name == "__init__.py")
        graph[module] = {d for _, d in found if d.startswith(PACKAGE + ".")} - {module}
    assert _cycle(graph) == []


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of `graph` as the path around it ([] when there is none)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node], _ = 1, path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node], _ = 2, path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_a_circle_is_named_with_its_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []
