"""Success against the turn cap: one policy evaluated at several caps (`eval --turn-cap 3
--turn-cap 10 ...`), the paper's "more turns at test time" measured on a checkpoint.

Contract: `await sweep_turn_caps(options, caps)` runs `run_evaluation` once per cap (ascending,
`options.turn_cap` replaced), all on one vLLM engine it starts for a local model (an API needs
none) and on the env servers it starts for envs `options.env_addresses` lacks, each cap's files
under `options.out / cap-<N>/`, and returns a `CapSweep`. With `out`, it also writes `caps.md` and `caps.json` there: per cap and env, Avg@n, Pass@n and the share of
episodes that ended on the cap (still going when the turns ran out).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from agentgym_rl.config.evaluate import EvalError, EvalOptions
from agentgym_rl.episode.scoring import ALL, EvalReport
from agentgym_rl.episode.types import Engine
from agentgym_rl.evaluation.job import load_tasks, run_evaluation, start_engine
from agentgym_rl.processes.env_servers import LocalEnvServers

CAPPED = "turn_cap"
"""The status of an episode that was still going when its turns ran out."""


@dataclass
class CapSweep:
    """The reports of one policy at each turn cap."""

    reports: dict[int, EvalReport]

    def rows(self) -> list[dict[str, Any]]:
        """One row per cap and env: cap, env, avg, pass, capped (share ended on the cap)."""
        out = []
        for cap, report in sorted(self.reports.items()):
            for row in report.rows:
                if row.category != ALL:
                    continue
                episodes = [r for r in report.records if r.env == row.env]
                capped = sum(r.status == CAPPED for r in episodes) / max(1, len(episodes))
                out.append(
                    {
                        "cap": cap,
                        "env": row.env,
                        "avg": row.avg,
                        "pass": row.pass_,
                        "capped": capped,
                        "episodes": len(episodes),
                    }
                )
        return out

    def to_markdown(self) -> str:
        n = next(iter(self.reports.values())).n
        lines = [
            f"| turn cap | env | Avg@{n} | Pass@{n} | ended on the cap |",
            "|---:|---|---:|---:|---:|",
        ]
        for r in self.rows():
            lines.append(
                f"| {r['cap']} | {r['env']} | {r['avg']:.3f} | {r['pass']:.3f} | "
                f"{r['capped']:.0%} |"
            )
        return "\n".join(lines) + "\n"

    def write(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "caps.md").write_text(self.to_markdown())
        (out / "caps.json").write_text(json.dumps({"rows": self.rows()}, indent=1) + "\n")


async def sweep_turn_caps(
    options: EvalOptions, caps: list[int], *, engine: Engine | None = None
) -> CapSweep:
    """See the module docstring; an `engine` passed in is used (and left running) instead."""
    if not caps or min(caps) < 1:
        raise EvalError(f"--turn-cap must be >= 1 (got {caps})")
    options.check(engine_given=engine is not None)
    started: Any = None  # an engine this call started (and stops)
    servers: LocalEnvServers | None = None  # env servers it started, shared by every cap
    base = options
    try:
        if engine is None and options.model is not None:
            started = engine = await start_engine(options)
            base = options.model_copy(update={"model": None})
        envs = sorted({t.env for t in load_tasks(options)})
        missing = [e for e in envs if not options.env_addresses.get(e)]
        if missing:
            log_dir = options.out or Path("runs/eval")
            servers = await asyncio.to_thread(
                partial(LocalEnvServers.start, missing, log_dir, env_options=options.env_options)
            )
            addresses = {**options.env_addresses, **servers.addresses()}
            base = base.model_copy(update={"env_addresses": addresses})
        reports: dict[int, EvalReport] = {}
        for cap in sorted(set(caps)):
            out = options.out / f"cap-{cap}" if options.out is not None else None
            at_cap = base.model_copy(update={"turn_cap": cap, "out": out})
            report = await run_evaluation(at_cap, engine=engine)
            report.meta["policy"] = str(options.model or options.api_model or "engine")
            reports[cap] = report
    finally:
        if servers is not None:
            servers.stop()
        if started is not None:
            started.shutdown()
    sweep = CapSweep(reports)
    if options.out is not None:
        sweep.write(options.out)
    return sweep
