"""Web env (MiniWoB++ on Chromium): throughput and memory per concurrent episode.

One `agentgym_envs.server miniwob` process (one Chromium, a context per episode). For each
concurrency N in 1, 8, 32: N client threads (HTTP keep-alive) each reset an episode, then step
it (`scroll [down]` / `scroll [up]`, each a full action + accessibility-tree observation) and
reset it to the next task every 8 steps, for a fixed time. Printed per N: steps/s over all
episodes, the median step latency, and the memory of the server with all its processes
(Playwright's driver, Chromium's browser, GPU, utility and renderer processes) while the N
episodes are live: summed RSS (counts shared pages once per process: an upper bound) and summed
PSS (shared pages split between their users), each per live episode. The goal is under 150 MB
per concurrent episode (AgentGym's WebArena server: ~1.7 GB for 1 env, ~16 GB for 20).

    python benches/bench_web.py [--quick] [--seconds 20] [--concurrency 1,8,32]

Key lines (one per N): `web N=<n>: <x> steps/s, <y> MB/episode rss, <z> MB/episode pss`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time

import httpx

from agentgym_rl.experiments.soak_figures import descendants
from agentgym_rl.processes.env_servers import EnvServerProcess
from figures import figure

ACTIONS = ["scroll [down]", "scroll [up]"]
STEPS_PER_RESET = 8
TASK_SPREAD = 58 * 7  # data_idx stride: every task of the set, then the next seeds


def memory_kib(pid: int) -> tuple[int, int]:
    """Summed (RSS, PSS) in KiB of `pid` and all its descendants."""
    rss = pss = 0
    for p in [pid, *descendants(pid)]:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            continue
    return rss, pss


def run_level(port: int, pid: int, n: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    finished: list[float] = []  # when each step ended
    lock = threading.Lock()
    ready = threading.Barrier(n + 1)
    stop = threading.Event()

    def episode(i: int) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            # the web envs' HTTP dialect: AgentGym's WebArena one (env_idx, idx, terminated)
            eid = http.post("/create").json()["env_idx"]
            task = i
            http.post("/reset", json={"env_idx": eid, "seed": 0, "idx": task})
            ready.wait()
            mine: list[float] = []
            ends: list[float] = []
            k = 0
            while not stop.is_set():
                t0 = time.perf_counter()
                step = http.post("/step", json={"env_idx": eid, "action": ACTIONS[k % 2]}).json()
                ends.append(time.perf_counter())
                mine.append(ends[-1] - t0)
                k += 1
                if k % STEPS_PER_RESET == 0 or step.get("terminated") or "error" in step:
                    task += TASK_SPREAD
                    http.post("/reset", json={"env_idx": eid, "seed": 0, "idx": task % 58_000})
            http.post("/close", json={"env_idx": eid})
        with lock:
            latencies.extend(mine)
            finished.extend(ends)

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    ready.wait()  # every episode reset and live
    t0 = time.perf_counter()
    time.sleep(seconds / 2)
    rss, pss = memory_kib(pid)
    time.sleep(seconds / 2)
    stop.set()
    t1 = time.perf_counter()
    for t in threads:
        t.join()
    done = sum(1 for end in finished if t0 <= end <= t1)  # steps ended within the window
    return {
        "episodes": n,
        "steps_per_s": done / (t1 - t0),
        "step_ms_p50": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "rss_mb": rss / 1024,
        "pss_mb": pss / 1024,
        "rss_mb_per_episode": rss / 1024 / n,
        "pss_mb_per_episode": pss / 1024 / n,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="4 s per level (~30 s in all)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured time per level")
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated levels")
    args = parser.parse_args()
    seconds = 4.0 if args.quick else args.seconds
    levels = [int(x) for x in args.concurrency.split(",")]
    server = EnvServerProcess("miniwob", python=sys.executable)
    try:
        server.start(timeout_s=60)
        idle_rss, idle_pss = memory_kib(server.pid)
        rows = [run_level(server.http_port, server.pid, n, seconds) for n in levels]
    finally:
        server.stop(grace_s=30)
    print(f"web env (miniwob on chromium), {seconds:.0f} s per level, one server process")
    print(
        f"  server idle (no browser yet): rss {idle_rss / 1024:.0f} MB, pss {idle_pss / 1024:.0f} MB"
    )
    print(
        f"  {'episodes':>8} {'steps/s':>9} {'step ms p50':>12} {'rss MB':>8} {'pss MB':>8} "
        f"{'rss MB/ep':>10} {'pss MB/ep':>10}"
    )
    for r in rows:
        print(
            f"  {r['episodes']:>8} {r['steps_per_s']:>9.1f} {r['step_ms_p50']:>12.1f} "
            f"{r['rss_mb']:>8.0f} {r['pss_mb']:>8.0f} {r['rss_mb_per_episode']:>10.1f} "
            f"{r['pss_mb_per_episode']:>10.1f}"
        )
    for r in rows:
        print(
            f"web N={r['episodes']}: {r['steps_per_s']:.1f} steps/s, "
            f"{r['rss_mb_per_episode']:.1f} MB/episode rss, {r['pss_mb_per_episode']:.1f} "
            "MB/episode pss"
        )
    for r in rows:
        figure("web", f"steps, {r['episodes']} episodes at once", r["steps_per_s"], "steps/s")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
