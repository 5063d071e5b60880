"""The run viewer over a large episode log: a synthetic run of 1,000,000 episodes (format 3, 100
tokens each, 1% of them held-out), served by a real `agentgym-rl view` process.

Prints, each from a freshly started viewer (its indexing thread starting beside the request, as
a user opening a run meets it), the time to the first page of the episodes table, and to the
first page of a filter matching 1% of the episodes (held-out ones); beside them, the baseline
of reading every line's scalars (the whole index, what a page would wait for if it indexed the
log first) and parsing every episode whole (what `show` does). Targets: each first page < 2 s.

    python benches/bench_viewer.py [--quick] [--episodes N]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from agentgym_rl.episode.log import EpisodeRecord, read_episodes
from agentgym_rl.processes.ports import free_port
from agentgym_rl.viewer.episode_index import EpisodeFilter, EpisodeIndex
from figures import figure

TOKENS = 100
HELD_OUT_SHARE = 0.01


def write_log(path: Path, episodes: int) -> None:
    """`episodes` lines as `EpisodeLog` writes them: 64 token-array templates, scalars varied."""
    rng = random.Random(0)
    templates = []
    for t in range(64):
        mask = [0] * 40 + [1] * 20 + [0] * 20 + [1] * 20
        rec = EpisodeRecord(
            item_id="x", env="babyai", category="GoTo", group_id=0, request_id="g0-e0",
            reward=0.0, success=False, status="done", turns=2, turn_cap=5, stage=0,
            dispatch_version=0, drift=False, tokenizer=None,
            input_ids=[rng.randrange(32_000) for _ in range(TOKENS)], loss_mask=mask,
            logprobs=[round(-rng.random(), 4) if m else 0.0 for m in mask],
            versions=[t % 7] * TOKENS, turn_spans=[(40, 60), (80, 100)],
        )  # fmt: skip
        line = rec.to_json()
        templates.append(line[line.index(',"input_ids":') :])
    with path.open("w") as f:
        for k in range(episodes):
            held = rng.random() < HELD_OUT_SHARE
            success = rng.random() < 0.4
            head = {
                "v": 3, "item_id": f"babyai_{rng.randrange(5000)}", "env": "babyai",
                "category": "GoTo", "group_id": k // 8, "request_id": f"g{k // 8}-e{k % 8}",
                "reward": float(success), "success": success, "status": "done" if success else "turn_cap",
                "turns": rng.randrange(1, 6), "turn_cap": 5, "stage": 0, "dispatch_version": k // 20_000,
                "drift": False, "tokenizer": None, "time": 0.0, "failure": None,
                "split": "held_out" if held else "train", "invalid_turns": rng.randrange(3), "forks": 0,
            }  # fmt: skip
            f.write(json.dumps(head, separators=(",", ":"))[:-1] + templates[k % 64] + "\n")


def first_page(run: Path, query: str) -> tuple[float, dict[str, object]]:
    """Seconds from a request to a freshly started viewer to its answer."""
    port = free_port()
    cmd = [sys.executable, "-m", "agentgym_rl.cli", "view", str(run), "--port", str(port)]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        server.stdout.readline()  # printed just before it listens
        url = f"http://127.0.0.1:{port}/api/episodes?{query}"
        for _ in range(200):
            try:
                t0 = time.perf_counter()
                with urllib.request.urlopen(url, timeout=60) as r:
                    body = json.loads(r.read())
                return time.perf_counter() - t0, body
            except (ConnectionError, urllib.error.URLError):
                time.sleep(0.05)
        raise RuntimeError("the viewer did not answer")
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20,000 episodes (smoke run)")
    parser.add_argument("--episodes", type=int, help="episodes in the log (default 1,000,000)")
    args = parser.parse_args()
    episodes = args.episodes or (20_000 if args.quick else 1_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        log = run / "rollout-0" / "episodes.jsonl"
        log.parent.mkdir()
        t0 = time.perf_counter()
        write_log(log, episodes)
        size = log.stat().st_size
        print(
            f"{episodes:,} episodes, {size / 1e6:,.0f} MB, written in {time.perf_counter() - t0:.1f} s"
        )
        plain, body = first_page(run, "page=0")
        assert len(body["rows"]) == 50  # type: ignore[arg-type]
        rare, body = first_page(run, "split=held_out&page=0")
        assert len(body["rows"]) == 50, body  # type: ignore[arg-type]
        t0 = time.perf_counter()
        index = EpisodeIndex([log])
        index.grow()
        whole = time.perf_counter() - t0
        held = index.page(EpisodeFilter(split="held_out"), 0, 1).matched
        sample = min(episodes, 20_000)  # parsing every episode whole: timed on a prefix
        t0 = time.perf_counter()
        for k, _ in enumerate(read_episodes(log)):
            if k + 1 == sample:
                break
        parse_all = (time.perf_counter() - t0) * episodes / sample
    print(f"held-out episodes: {held:,} ({held / episodes:.2%})")
    print("| what | seconds |")
    print("|---|---:|")
    print(f"| first page, fresh viewer | {plain:.3f} |")
    print(f"| first page of a 1% filter (held-out), fresh viewer | {rare:.3f} |")
    print(f"| index every line's scalars (baseline) | {whole:.2f} |")
    print(
        f"| parse every episode whole, as `show` reads a log | {parse_all:.1f} (from {sample:,}) |"
    )
    for name, value in (("first page", plain), ("first page, 1% filter", rare)):
        figure(
            "viewer",
            f"{name} of {episodes:,} episodes",
            value,
            "s",
            baseline=whole,
            baseline_name="index every line first",
            target="< 2 s",
            lower_is_better=True,
        )


if __name__ == "__main__":
    main()
