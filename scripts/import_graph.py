"""The package's import graph in three numbers: modules, import edges between them, cycles.

    python scripts/import_graph.py [PACKAGE_DIR]     # default: python/agentgym_rl

Every module is parsed with `ast`; an edge is an `agentgym_rl.*` import (at the top, inside a
function or under TYPE_CHECKING alike) resolved to a module of the package (`from a.b import c`
counts `a.b.c` when that is a module, else `a.b`). Cycles are the strongly connected components
of more than one module. Prints the three counts, then each cycle's modules.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "agentgym_rl"


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package; the Rust extension counts by its stub (`_core.pyi`)."""
    out = {}
    for path in sorted([*root.rglob("*.py"), *root.glob("_core.pyi")]):
        parts = path.relative_to(root).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        out[".".join((PACKAGE, *parts))] = path
    return out


def edges(mods: dict[str, Path]) -> set[tuple[str, str]]:
    found = set()
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            for t in targets:
                if t.split(".")[0] != PACKAGE:
                    continue
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    found.add((name, t))
                    break
    return found


def cycles(nodes: list[str], arcs: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan's algorithm)."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in arcs:
        succ[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for n in nodes:
        if n not in index:
            visit(n)
    return out


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "python/agentgym_rl")
    mods = modules(root)
    arcs = edges(mods)
    found = cycles(sorted(mods), arcs)
    print(f"modules {len(mods)}  import edges {len(arcs)}  cycles {len(found)}")
    for comp in found:
        print("  cycle:", " ".join(comp))


if __name__ == "__main__":
    main()
