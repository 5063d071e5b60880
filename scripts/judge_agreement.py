"""Does a judge agree with the env, and what does it cost? (issue: judge rewards, section 2)

Evaluates one policy greedily on a held-out split (so every evaluation plays the same episodes)
three times: without a judge, with the scripted oracle judge (tests/scripted_judge.py served by
uvicorn: it reads BabyAI's own verdict from the transcript, so it must agree on every episode:
the plumbing), and with a model judge (a local HF folder, served by vLLM's OpenAI server). Writes
`records.json` (each evaluation's success, seconds, and the judge's agreement, confusion table,
correlation, calls and tokens) and prints a markdown table, for docs/results/judge.

    python scripts/judge_agreement.py --policy runs/babyai_goto/checkpoints/step_60/hf \\
        --judge runs/models/smollm2-135m-instruct --out docs/results/judge --limit 60
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SPLIT = "envs/agentgym_envs/babyai/data/goto_test.json"


def evaluate(policy: str, out: Path, limit: int, judge: list[str]) -> dict[str, Any]:
    argv = [sys.executable, "-m", "agentgym_rl.cli", "eval", "--model", policy, "--split", SPLIT]
    argv += ["--limit", str(limit), "--temperature", "0", "--dtype", "float32", "--no-progress"]
    argv += ["--turn-cap", "5", "--no-yardsticks", "--out", str(out), *judge]
    started = time.monotonic()
    subprocess.run(argv, check=True, cwd=ROOT)
    data = json.loads((out / "eval.json").read_text())
    row = next(r for r in data["rows"] if r["category"] == "all")
    return {
        "seconds": round(time.monotonic() - started, 1),
        "success": row["avg"],
        "episodes": len(data["episodes"]),
        "judge": data.get("judge"),
        "judge_counters": data["meta"].get("judge"),
    }


def oracle_server(port: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "uvicorn", "--app-dir", str(ROOT / "tests"), "scripted_judge:app"]
    proc = subprocess.Popen([*argv, "--port", str(port), "--log-level", "warning"])
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the oracle judge did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", required=True, help="the evaluated policy (HF folder)")
    parser.add_argument("--judge", required=True, help="the model judge (a local HF folder)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--work", type=Path, default=Path("runs/judge-agreement"))
    args = parser.parse_args()
    from agentgym_rl.processes.ports import free_port

    records: dict[str, Any] = {"policy": args.policy, "judge": args.judge, "split": SPLIT}
    records["none"] = evaluate(args.policy, args.work / "none", args.limit, [])
    port = free_port()
    server = oracle_server(port)
    try:
        oracle = ["--judge-model", "oracle", "--judge-url", f"http://127.0.0.1:{port}/v1"]
        records["oracle"] = evaluate(args.policy, args.work / "oracle", args.limit, oracle)
    finally:
        server.terminate()
        server.wait(10)
    model = ["--judge-model", args.judge, "--judge-max-model-len", "4096"]
    records["model"] = evaluate(args.policy, args.work / "model", args.limit, model)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "records.json").write_text(json.dumps(records, indent=1) + "\n")
    print(
        "| judge | episodes | agreement | both | judge only | env only | neither | corr | "
        "calls | tokens/episode | eval s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in ("oracle", "model"):
        r = records[name]
        a, c = r["judge"]["all"], r["judge_counters"]
        k = a["confusion"]
        tokens = (c["judge_prompt_tokens"] + c["judge_completion_tokens"]) / max(1, a["episodes"])
        corr = "-" if a["correlation"] is None else f"{a['correlation']:.2f}"
        print(
            f"| {name} | {a['episodes']} | {a['agreement']:.3f} | {k['both']} | "
            f"{k['judge_only']} | {k['env_only']} | {k['neither']} | {corr} | "
            f"{c['judge_calls']} | {tokens:.0f} | {r['seconds']} |"
        )
    print(
        f"| (no judge) | {records['none']['episodes']} | | | | | | | | | "
        f"{records['none']['seconds']} |"
    )


if __name__ == "__main__":
    main()
