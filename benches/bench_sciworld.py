"""SciWorld: our pooled env server against one simulator JVM per episode, side by side.

(a) our server (`agentgym_envs.server sciworld`, HTTP keep-alive client): episodes reuse pooled
    JVMs, a step is the simulator's raw step (+ score, completed, moves);
(b) AgentGym's way: a new `ScienceWorldEnv` (a fresh JVM with the JVM's default heap) per
    episode, `load` + the wrapper's `step("look around")` on reset, the wrapper's `step` (which
    also asks for look, inventory, task text and every valid action) per step, `close` at the end.

Printed: create+reset latency (median, ms) and steps/s of each, with the ratio; then our
server's memory (its RSS plus its JVMs' RSS) at the start, middle and end of N sequential
episodes (default 500), which should stay flat (within 10%). Every episode plays the same 10
generic actions on a different task variation.

    python benches/bench_sciworld.py [--quick] [--episodes 500] [--reference-episodes 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import httpx

from agentgym_rl.experiments.soak_figures import tree_figures
from agentgym_rl.processes.env_servers import EnvServerProcess
from figures import figure

ACTIONS = [
    "look around",
    "inventory",
    "open door to kitchen",
    "go to kitchen",
    "look around",
    "open door to hallway",
    "go to hallway",
    "look at agent",
    "wait1",
    "task",
]
# A spread of tasks over the numbering (see agentgym_envs.sciworld.tasks).
TASK_STARTS = [0, 120, 660, 1096, 1396, 1436, 2336, 2936, 3536, 4136, 4240, 4615]


def task_idx(i: int) -> int:
    return TASK_STARTS[i % len(TASK_STARTS)] + (i // len(TASK_STARTS)) % 10


def tree_mib(pid: int) -> float:
    """The server's resident memory with its descendants' (the JVMs), in MiB."""
    return tree_figures(pid)[0]  # VmRSS kB / 1024


def server_episode(http: httpx.Client, i: int) -> tuple[float, float, int]:
    """(create+reset seconds, step seconds, steps) of one episode on our server."""
    t0 = time.perf_counter()
    eid = http.post("/create").json()["id"]
    reply = http.post("/reset", json={"id": eid, "data_idx": task_idx(i)}).json()
    assert "error" not in reply, reply
    t1 = time.perf_counter()
    steps = 0
    for action in ACTIONS:
        reply = http.post("/step", json={"id": eid, "action": action}).json()
        steps += 1
        if "error" in reply or reply["done"]:
            break
    t2 = time.perf_counter()
    http.post("/close", json={"id": eid})
    return t1 - t0, t2 - t1, steps


def reference_episode(i: int) -> tuple[float, float, int]:
    """The same episode the AgentGym way: a JVM of its own, the wrapper's full step."""
    from scienceworld import ScienceWorldEnv

    from agentgym_envs.sciworld.tasks import TASK_LIST

    task = TASK_LIST[task_idx(i)]
    t0 = time.perf_counter()
    env = ScienceWorldEnv()
    env.load(task.name, task.variation)
    env.get_task_description()
    env.step("look around")
    t1 = time.perf_counter()
    steps = 0
    for action in ACTIONS:
        _, _, done, _ = env.step(action)
        steps += 1
        if done:
            break
    t2 = time.perf_counter()
    env.close()
    return t1 - t0, t2 - t1, steps


def summarize(runs: list[tuple[float, float, int]]) -> tuple[float, float]:
    """(median create+reset ms, steps/s over all steps)."""
    return (
        1000 * statistics.median(r[0] for r in runs),
        sum(r[2] for r in runs) / sum(r[1] for r in runs),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs for CI (< 60 s)")
    parser.add_argument("--episodes", type=int, default=500, help="episodes on our server")
    parser.add_argument("--reference-episodes", type=int, default=8)
    args = parser.parse_args()
    episodes = 40 if args.quick else args.episodes
    ref_episodes = 2 if args.quick else args.reference_episodes

    server = EnvServerProcess("sciworld", python=sys.executable)
    mib: dict[str, float] = {}
    try:
        server.start("--env-option", "jvms=2", "--env-option", "warm=1", timeout_s=120)
        pid = server.pid
        with httpx.Client(base_url=server.http, timeout=60) as http:
            mib["start"] = tree_mib(pid)
            runs = []
            for i in range(episodes):
                runs.append(server_episode(http, i))
                if i == 0:
                    mib["after 1"] = tree_mib(pid)
                if i + 1 == episodes // 2:
                    mib["middle"] = tree_mib(pid)
            mib["end"] = tree_mib(pid)
    finally:
        server.stop(grace_s=30)
    ref_runs = [reference_episode(i) for i in range(ref_episodes)]

    ours, ref = summarize(runs), summarize(ref_runs)
    print(f"SciWorld, sequential episodes of {len(ACTIONS)} steps on a spread of tasks")
    print(f"  {'':<44} {'create+reset':>14} {'steps/s':>10}")
    print(
        f"  {'(a) pooled server (HTTP), ' + str(episodes) + ' episodes':<44} "
        f"{ours[0]:>11,.0f} ms {ours[1]:>10,.1f}"
    )
    print(
        f"  {'(b) JVM per episode (AgentGym), ' + str(ref_episodes) + ' episodes':<44} "
        f"{ref[0]:>11,.0f} ms {ref[1]:>10,.1f}"
    )
    print(
        f"ratio (a)/(b): create+reset {ref[0] / ours[0]:.1f}x faster, steps/s {ours[1] / ref[1]:.1f}x"
    )
    figure(
        "sciworld", "steps, one JVM per server", ours[1], "steps/s", baseline=ref[1],
        baseline_name="a JVM per episode (AgentGym)",
    )  # fmt: skip
    print(
        f"memory (server + its JVMs) over {episodes} episodes: "
        + ", ".join(f"{k} {v:,.0f} MiB" for k, v in mib.items())
    )
    drift = mib["end"] / mib["after 1"] - 1
    print(
        f"memory end vs after episode 1: {100 * drift:+.1f}% ({'flat' if abs(drift) <= 0.10 else 'NOT flat'})"
    )
    print(json.dumps({"ours": ours, "reference": ref, "memory_mib": mib}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
