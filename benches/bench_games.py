"""In-process steps/s of the small text games, Wordle and Maze, against the bare loop.

Each env plays whole random episodes (`Episode.random_action` every turn: Wordle a uniformly
random valid word, Maze a random walk through open sides) over the tasks of its train split, one
after another on one core, for a fixed time; the `noop` env run through the same loop is the
baseline (the loop's own cost). Printed per env: episodes, steps, steps/s, microseconds per step
(resets included) and the success rate of random play (its chance level, at the env's default
limits: 6 guesses, 50 moves); then one key line each:
`<env>: <x> steps/s in process, <y> us/step (<z>x the noop loop's time per step)`.

    python benches/bench_games.py [--quick] [--seconds 3]
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass

from agentgym_envs.maze.env import MazeEnvironment
from agentgym_envs.noop import NoopEnvironment
from agentgym_envs.server.base import Environment
from agentgym_envs.wordle.env import WordleEnvironment
from figures import figure


@dataclass
class Figures:
    episodes: int = 0
    steps: int = 0
    wins: int = 0
    seconds: float = 0.0

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds

    @property
    def us_per_step(self) -> float:
        return 1e6 * self.seconds / self.steps


def play(env: Environment, ids: list[int], seconds: float, turn_cap: int = 100) -> Figures:
    """Random episodes over `ids` (cycled) until `seconds` have passed."""
    rng = random.Random(0)
    episode = env.new_episode()
    out = Figures()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        result = episode.reset(ids[out.episodes % len(ids)])
        for _ in range(turn_cap):  # noop never ends on its own unless it draws "stop"
            action = episode.random_action(rng)
            if action is None:
                break
            result = episode.step(action)
            out.steps += 1
            if result.done:
                break
        out.episodes += 1
        out.wins += result.score > 0
    out.seconds = time.perf_counter() - start
    return out


def train_ids(env: type[Environment]) -> list[int]:
    return [int(row["item_id"].rsplit("_", 1)[1]) for row in env.tasks("train")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="0.5 s per env (CI smoke run)")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per env (default 3)")
    args = parser.parse_args()
    seconds = 0.5 if args.quick else args.seconds

    runs = {
        "wordle": play(WordleEnvironment(), train_ids(WordleEnvironment), seconds),
        "maze": play(MazeEnvironment(), train_ids(MazeEnvironment), seconds),
        "noop": play(NoopEnvironment(), list(range(100)), seconds),
    }
    print("random episodes in process, one core, resets included:")
    header = ("env", "episodes", "steps", "steps/s", "us/step", "success")
    print("  {:<8} {:>9} {:>10} {:>11} {:>8} {:>8}".format(*header))
    for name, f in runs.items():
        # noop "wins" whenever it draws "stop": a success rate of it means nothing
        success = "-" if name == "noop" else f"{f.wins / f.episodes:.3f}"
        print(
            f"  {name:<8} {f.episodes:>9,} {f.steps:>10,} {f.steps_per_s:>11,.0f} "
            f"{f.us_per_step:>8.2f} {success:>8}"
        )
    base = runs["noop"].us_per_step
    for name in ("wordle", "maze"):
        f = runs[name]
        print(
            f"{name}: {f.steps_per_s:,.0f} steps/s in process, {f.us_per_step:.2f} us/step "
            f"({f.us_per_step / base:.1f}x the noop loop's time per step)"
        )
        figure(
            "games", f"{name} step", f.us_per_step, "us", ceiling=base,
            ceiling_name="the noop env's loop", lower_is_better=True,
        )  # fmt: skip


if __name__ == "__main__":
    main()
