"""Does a judge agree with the env, and what does it cost? (issue: judge rewards, section 2)

Two steps, one command each:

make-set: a fixed set of logged episodes from a recorded run. Up to `--per-class` successes and
as many failures of its training episodes (drawn with a fixed seed; env failures left out), each
decoded to what a judge reads (the task, then per turn the policy's reply and the env's answer,
the last from the log's `last_observation`) with its env reward, success and the task's
reference answer (its split's `reference`, where the split has one). One JSON line an episode.

    python scripts/judge_agreement.py make-set runs/judge-src/searchqa \\
        docs/results/judge/searchqa-set.jsonl

score: every set judged one episode per call by the scripted oracle judge (tests/scripted_judge.py
served by uvicorn, asked through the same OpenAI path: it reads the env's own verdict from the
transcript, so it must agree on every episode: the plumbing) and by a model judge (a local HF
folder, served by vLLM's OpenAI server with guided decoding, as a run serves it). Writes
records.json (per set and judge: agreement, confusion, correlation, calls, tokens per episode,
seconds, and every episode's score) and prints a markdown table.

    python scripts/judge_agreement.py score --judge runs/models/smollm2-135m-instruct \\
        --out docs/results/judge docs/results/judge/*-set.jsonl

run-record: a judged training run, compact (`run_record` says what), for docs/results/judge.

    python scripts/judge_agreement.py run-record runs/judge-goto-s0 docs/results/judge/run-s0.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from agentgym_rl.config.rollout import JudgeConfig
from agentgym_rl.episode.dataset import load_split
from agentgym_rl.episode.log import EpisodeRecord, find_episode_log, read_episodes
from agentgym_rl.episode.scoring import EvalRecord, judge_agreement
from agentgym_rl.judging.judge import Judge, JudgeFailed
from agentgym_rl.judging.rubric import Transcript
from agentgym_rl.judging.serving import served_judge

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted oracle judge and its server
from asgi_procs import AsgiProc  # noqa: E402

SUCCESS_AT = 0.5
_BLOCK = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|$)", re.S)


# ---- make-set ---------------------------------------------------------------------------------


def message(text: str, role: str) -> str:
    """The last `role` message of a ChatML stretch (the whole stretch, markers dropped, when it
    holds no such block)."""
    blocks = [body for r, body in _BLOCK.findall(text) if r == role]
    if blocks:
        return blocks[-1].strip()
    return re.sub(r"<\|[^|]*\|>", "", text).strip()


def transcript(rec: EpisodeRecord, decode: Any) -> tuple[str, list[list[str]]]:
    """The task (the first user message) and every (reply, answer) turn of a logged episode."""
    ids, spans = rec.input_ids, rec.turn_spans
    task = message(decode(ids[: spans[0][0]] if spans else ids), "user")
    turns = []
    for k, (start, end) in enumerate(spans):
        after = spans[k + 1][0] if k + 1 < len(spans) else len(ids)
        reply = re.sub(r"<\|[^|]*\|>", "", decode(ids[start:end])).strip()
        turns.append([reply, message(decode(ids[end:after]), "user")])
    if turns and rec.last_observation is not None:
        turns[-1][1] = rec.last_observation  # the answer that ended it: in no context
    return task, turns


def references(run: Path) -> dict[str, str | None]:
    """The reference answer of every task of the run's training split (its rollout config's)."""
    dataset = yaml.safe_load((run / "configs" / "rollout-0.yaml").read_text())["dataset"]
    sources = dataset.get("mix") or [dataset]
    return {t.item_id: t.reference for d in sources for t in load_split(d["split"], d["env"])}


def make_set(run: Path, out: Path, per_class: int, seed: int) -> None:
    from transformers import AutoTokenizer

    episodes = [
        e
        for e in read_episodes(find_episode_log(run))
        if e.split == "train" and e.status != "env_failure" and not e.parts and e.turn_spans
    ]
    if episodes and episodes[-1].last_observation is None:
        raise SystemExit(f"{run}: its log keeps no last_observation (episode log version < 5)")
    rng = random.Random(seed)
    chosen: list[EpisodeRecord] = []
    for success in (True, False):
        pool = [e for e in episodes if e.success == success]
        chosen += rng.sample(pool, min(per_class, len(pool)))
    tokenizer = AutoTokenizer.from_pretrained(chosen[0].tokenizer)
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
    refs = references(run)
    rows: list[dict[str, Any]] = []
    for e in sorted(chosen, key=lambda e: e.request_id):
        task, turns = transcript(e, decode)
        rows.append(
            {
                "item_id": e.item_id,
                "env": e.env,
                "category": e.category,
                "request_id": e.request_id,
                "version": e.dispatch_version,
                "success": e.success,
                "reward": round(float(e.reward), 4),
                "status": e.status,
                "reference": refs.get(e.item_id),
                "task": task,
                "turns": turns,
            }
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    wins = sum(r["success"] for r in rows)
    print(f"{out}: {len(rows)} episodes ({wins} successes) of {len(episodes)} logged in {run}")


# ---- run-record -------------------------------------------------------------------------------


def run_record(run: Path, how: str) -> dict[str, Any]:
    """A judged training run, compact: held-out success by version and category beside its
    yardsticks, wall time, the judge's counters, and how its scores of the run's own episodes
    agreed with the env's verdict (all of them, and the first and last fifth)."""
    summary = json.loads((run / "summary.json").read_text())
    evals = [json.loads(x) for x in (run / "rollout-0" / "eval.jsonl").read_text().splitlines()]
    metrics = (run / "rollout-0" / "metrics.jsonl").read_text().splitlines()
    last = json.loads(metrics[-1])
    judged = [e for e in read_episodes(find_episode_log(run)) if e.judge is not None]
    fifth = max(1, len(judged) // 5)

    def agreement(episodes: list[EpisodeRecord]) -> dict[str, Any]:
        verdicts = [(e, e.judge or {}) for e in episodes]
        records = [
            EvalRecord(e.env, e.category, e.item_id, e.success, v["env_reward"], judged=v["score"])
            for e, v in verdicts
        ]
        return judge_agreement(records, SUCCESS_AT)

    yardsticks = next(iter(summary["yardsticks"].values()))
    return {
        "run": run.name,
        "how": how,
        "wall_min": round(summary["wall_time_s"] / 60, 1),
        "steps": summary["steps"],
        "success": {str(e["version"]): e["success"] for e in evals},
        "final_by_category": evals[-1]["by_category"],
        "chance": yardsticks["chance"],
        "rule": yardsticks["rule"],
        "episodes": summary["episodes"],
        "judge": {k: v for k, v in last.items() if k.startswith("judge")},
        "agreement": {
            "all": agreement(judged),
            "first_fifth": agreement(judged[:fifth]),
            "last_fifth": agreement(judged[-fifth:]),
        },
    }


# ---- score ------------------------------------------------------------------------------------


async def scored(judge: Judge, row: dict[str, Any]) -> float | None:
    """The judge's score of one episode; None where it failed (counted in its counters)."""
    t = Transcript(row["task"], tuple((reply, answer) for reply, answer in row["turns"]))
    try:
        return (await judge.score(t, row["reference"])).score
    except JudgeFailed:
        return None


async def judge_set(judge: Judge, rows: list[dict[str, Any]]) -> dict[str, Any]:
    before = judge.counters.snapshot()
    started = time.monotonic()
    scores = await asyncio.gather(*(scored(judge, r) for r in rows))
    seconds = time.monotonic() - started
    after = judge.counters.snapshot()
    spent = {k: after[k] - before[k] for k in after}
    records = [
        EvalRecord(r["env"], r["category"], r["item_id"], r["success"], r["reward"], judged=s)
        for r, s in zip(rows, scores, strict=True)
    ]
    agreement = judge_agreement(records, SUCCESS_AT)
    tokens = spent["judge_prompt_tokens"] + spent["judge_completion_tokens"]
    return {
        **agreement,
        "calls": spent["judge_calls"],
        "unparsed": spent["judge_unparsed"],
        "failed": spent["judge_failed_groups"],
        "prompt_tokens_per_episode": round(spent["judge_prompt_tokens"] / len(rows), 1),
        "tokens_per_episode": round(tokens / len(rows), 1),
        "seconds": round(seconds, 1),
        "episodes_per_s": round(len(rows) / seconds, 3),
        "scores": scores,
    }


async def score_all(sets: list[Path], judge_model: str, log_dir: Path) -> dict[str, Any]:
    data = {p.name.removesuffix("-set.jsonl"): _rows(p) for p in sets}
    results: dict[str, Any] = {name: {} for name in data}
    server = AsgiProc("scripted_judge:app", ready_path="/health").start()
    try:
        config = JudgeConfig(model="oracle", url=f"{server.url}/v1")
        async with served_judge(config, log_dir) as oracle:
            for name, rows in data.items():
                results[name]["oracle"] = await judge_set(oracle, rows)
    finally:
        server.stop()
    config = JudgeConfig(model=judge_model, max_model_len=4096, max_in_flight=8)
    started = time.monotonic()
    async with served_judge(config, log_dir) as model:
        ready = time.monotonic() - started
        for name, rows in data.items():
            results[name]["model"] = await judge_set(model, rows)
    return {"judge": judge_model, "judge_start_s": round(ready, 1), "sets": results}


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def table(record: dict[str, Any]) -> str:
    lines = [
        "| set | judge | episodes | agreement | both | judge only | env only | neither | corr | "
        "tokens/episode | episodes/s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, judges in record["sets"].items():
        for judge, a in judges.items():
            k = a["confusion"]
            corr = "-" if a["correlation"] is None else f"{a['correlation']:.2f}"
            lines.append(
                f"| {name} | {judge} | {a['episodes']} | {a['agreement']:.3f} | {k['both']} | "
                f"{k['judge_only']} | {k['env_only']} | {k['neither']} | {corr} | "
                f"{a['tokens_per_episode']:.0f} | {a['episodes_per_s']:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make-set", help="a fixed set of logged episodes from a recorded run")
    make.add_argument("run", type=Path, help="a run folder (its rollout-0/episodes.jsonl)")
    make.add_argument("out", type=Path, help="the set file to write (JSON lines)")
    make.add_argument("--per-class", type=int, default=50, help="successes, and failures, drawn")
    make.add_argument("--seed", type=int, default=0)
    score = sub.add_parser("score", help="judge sets with the oracle and a model judge")
    score.add_argument("sets", type=Path, nargs="+", help="set files (<name>-set.jsonl)")
    score.add_argument("--judge", required=True, help="the model judge (a local HF folder)")
    score.add_argument("--out", type=Path, required=True, help="where records.json goes")
    score.add_argument("--log-dir", type=Path, default=Path("runs/judge-agreement"))
    rec = sub.add_parser("run-record", help="a judged training run's compact record")
    rec.add_argument("run", type=Path, help="the run folder")
    rec.add_argument("out", type=Path, help="the JSON file to write")
    rec.add_argument("--how", default="", help="how the run was made (kept in the record)")
    args = parser.parse_args()
    if args.command == "run-record":
        record = run_record(args.run, args.how)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(json.dumps({k: record[k] for k in ("success", "wall_min", "judge")}, indent=1))
        return
    if args.command == "make-set":
        make_set(args.run, args.out, args.per_class, args.seed)
        return
    args.log_dir.mkdir(parents=True, exist_ok=True)
    record = asyncio.run(score_all(args.sets, args.judge, args.log_dir))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "records.json").write_text(json.dumps(record, indent=1) + "\n")
    print(table(record))


if __name__ == "__main__":
    main()
