"""One line per run of the README's main command, in docs/results/babyai-goto/main-runs.json.

    python scripts/main_run_record.py RUN --how "fresh clone and fresh virtualenv" [--date D]
    python scripts/main_run_record.py --from-record docs/results/babyai-goto/runs.json#. \
        --how "..." --date 2026-11-28 --commit 7d66315

Each line keeps what the README and docs/babyai.md quote of a run: the date, the commit it ran,
how it was run, its wall time (model creation included, and creation alone), held-out success at
every evaluated version, the final success by task category, and chance and the scripted rule on
the same tasks and cap; `record` names a fuller record of it when one was kept. The newest line
is the latest run. RUN is a finished run folder (`runs/babyai_goto`); `--from-record` reads one
entry of a compact study record (`scripts/compact_results.py`) instead.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from compact_results import entry  # noqa: E402  (scripts/ is not a package)

OUT = ROOT / "docs" / "results" / "babyai-goto" / "main-runs.json"


def line(
    run: dict[str, Any], how: str, date: str, commit: str | None, record: str | None
) -> dict[str, Any]:
    """The run's line, from its compact entry (`compact_results.entry`)."""
    summary = run["summary"] or {}
    evals = [e for server in run["eval"].values() for e in server]
    if not evals or not summary:
        raise SystemExit("the run has no held-out evaluation or no summary.json: not finished?")
    sticks = next(iter((summary.get("yardsticks") or {}).values()), {})
    final = max(evals, key=lambda e: e["version"])
    return {
        "date": date,
        "commit": commit,
        "how": how,
        "wall_min": round(summary["wall_time_s"] / 60, 1),
        "creation_min": round(summary.get("model_creation_s", 0.0) / 60, 1),
        "success": {
            str(e["version"]): e["success"] for e in sorted(evals, key=lambda e: e["version"])
        },
        "final_by_category": final.get("by_category", {}),
        "chance": sticks.get("chance"),
        "rule": sticks.get("rule"),
        "record": record,
    }


def write(lines: list[dict[str, Any]], out: Path) -> None:
    """A JSON list, one run a line (diffs stay one line a run)."""
    body = ",\n".join(json.dumps(x, separators=(",", ":")) for x in lines)
    out.write_text(f"[\n{body}\n]\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, nargs="?", help="a finished run folder")
    parser.add_argument("--from-record", help="STUDY/runs.json#KEY: an entry of a compact record")
    parser.add_argument("--how", required=True, help="how it was run (fresh clone, ...)")
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument(
        "--commit", help="the commit it ran (default: this checkout's HEAD; 'none': not known)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if (args.run is None) == (args.from_record is None):
        parser.error("give a run folder or --from-record, one of them")
    record = None
    if args.from_record:
        path, _, key = args.from_record.partition("#")
        run = json.loads(Path(path).read_text())[key or "."]
        record = os.path.relpath(Path(path).resolve(), args.out.resolve().parent)
    else:
        run = entry(args.run)
    commit = (
        args.commit
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
    )
    lines = json.loads(args.out.read_text()) if args.out.is_file() else []
    lines.append(line(run, args.how, args.date, None if commit == "none" else commit, record))
    write(lines, args.out)
    print(f"{args.out}: {len(lines)} runs; the newest: {json.dumps(lines[-1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
