"""Success against the test-time turn cap, per group of runs: the paper's "more turns at test
time" read off each run's final policy.

Contract: `write_cap_curves(groups, out_dir)` takes `{label: [run_dir, ...]}`, reads each run's
`turn-caps/caps.json` (what `eval --run RUN --turn-cap A --turn-cap B ... --out RUN/turn-caps`
writes) and, when any run has one, writes `turn_caps.png` (per group: mean Avg success against
cap, the min-max band over its runs, each run faint) and `turn_caps.md` / `turn_caps.json` (per
group and cap: mean, min, max, runs, and the share of episodes that ended on the cap). Runs
without the file are left out; no run with it: nothing written, `[]` returned.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean
from typing import Any

from matplotlib.figure import Figure

CAPS_FILE = Path("turn-caps") / "caps.json"
"""Where a run keeps its success per test-time cap."""


def _read(run_dir: Path) -> dict[int, tuple[float, float]]:
    """cap -> (success, share ended on the cap), all envs of the run pooled by episodes."""
    path = run_dir / CAPS_FILE
    if not path.is_file():
        return {}
    pooled: dict[int, list[tuple[float, float, int]]] = {}
    for row in json.loads(path.read_text())["rows"]:
        pooled.setdefault(int(row["cap"]), []).append(
            (float(row["avg"]), float(row["capped"]), int(row["episodes"]))
        )
    return {
        cap: (
            sum(a * n for a, _, n in rows) / max(1, sum(n for *_, n in rows)),
            sum(c * n for _, c, n in rows) / max(1, sum(n for *_, n in rows)),
        )
        for cap, rows in pooled.items()
    }


def cap_table(groups: dict[str, list[Path]]) -> dict[str, list[dict[str, Any]]]:
    """Per group, one entry per cap: cap, mean, min, max success, capped share, runs."""
    table: dict[str, list[dict[str, Any]]] = {}
    for label, dirs in groups.items():
        per_run = [r for r in (_read(d) for d in dirs) if r]
        caps = sorted({c for r in per_run for c in r})
        rows = []
        for cap in caps:
            values = [r[cap] for r in per_run if cap in r]
            successes = [s for s, _ in values]
            rows.append(
                {
                    "cap": cap,
                    "mean": mean(successes),
                    "min": min(successes),
                    "max": max(successes),
                    "capped": mean(c for _, c in values),
                    "runs": len(values),
                    "each": successes,
                }
            )
        if rows:
            table[label] = rows
    return table


def _draw(table: dict[str, list[dict[str, Any]]], path: Path) -> None:
    fig = Figure(figsize=(5.6, 4.2))
    ax = fig.subplots()
    for label, rows in table.items():
        caps = [r["cap"] for r in rows]
        [line] = ax.plot(caps, [r["mean"] for r in rows], marker="o", label=label)
        ax.fill_between(
            caps,
            [r["min"] for r in rows],
            [r["max"] for r in rows],
            color=line.get_color(),
            alpha=0.18,
            linewidth=0,
        )
    ax.set(xlabel="turn cap at test time", ylabel="held-out success", ylim=(-0.02, 1.02))
    ax.set_xticks(sorted({r["cap"] for rows in table.values() for r in rows}))
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title("final policies: mean over seeds, band: min to max", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _markdown(table: dict[str, list[dict[str, Any]]]) -> str:
    lines = [
        "| group | turn cap | runs | success (mean) | min | max | ended on the cap |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, rows in table.items():
        for r in rows:
            lines.append(
                f"| {label} | {r['cap']} | {r['runs']} | {r['mean']:.3f} | {r['min']:.3f} | "
                f"{r['max']:.3f} | {r['capped']:.0%} |"
            )
    return "\n".join(lines) + "\n"


def write_cap_curves(groups: dict[str, list[Path]], out_dir: Path) -> list[Path]:
    """See the module docstring."""
    table = cap_table(groups)
    if not table:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    png, md, js = (out_dir / f"turn_caps.{ext}" for ext in ("png", "md", "json"))
    _draw(table, png)
    md.write_text(_markdown(table))
    js.write_text(json.dumps(table, indent=2) + "\n")
    return [png, md, js]


__all__ = ["CAPS_FILE", "cap_table", "write_cap_curves"]
