"""The yardsticks of a split, per category: chance, the success of a policy that plays the env's
own random valid action every turn (`Episode.random_action`: BabyAI a uniformly random available
action, SearchQA a search for a run of the question's words, then an entity of the passages
shown), and the rule, the success of the env's scripted rule (`Episode.rule_action`: BabyAI the
goal's action when listed, else a turn). A policy that reads its task should close the gap from
the first to the second.

    python -m agentgym_envs.chance --env babyai --env-option observation=compact \
        --split envs/agentgym_envs/babyai/data/goto_test.json --turn-cap 5 --tries 10
    python -m agentgym_envs.chance ... --policy rule

GoTo levels have a high chance level: going to a seen object is one action, so a random pick
among a handful of listed actions often names the goal.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from agentgym_envs import load_env
from agentgym_envs.server.base import Environment, Episode
from agentgym_envs.server.cli import parse_env_options

POLICIES = ("random", "rule")
"""The yardstick policies: the env's random valid action, its scripted rule."""


def declares_rule(env: Environment) -> bool:
    """Whether the env declares a scripted rule (`Environment.rule`)."""
    return type(env).rule is not None


def yardstick_success(
    env: Environment,
    items: list[dict[str, str]],
    turn_cap: int,
    tries: int,
    seed: int = 0,
    policy: str = "random",
) -> dict[str, float]:
    """Success rate of `policy` (random valid actions, or the env's rule) over `tries` episodes
    per task: per category, and over all episodes under "all". `items` are split rows
    ({"item_id": "<env>_<id>", "category"}). Raises ValueError for an env without a rule."""
    if turn_cap < 1 or tries < 1:
        raise ValueError(f"turn_cap and tries must be >= 1 (got {turn_cap}, {tries})")
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    if policy == "rule" and not declares_rule(env):
        raise ValueError(f"env {env.name!r} declares no scripted rule (Environment.rule)")
    rng = random.Random(seed)
    episode = env.new_episode()
    act = episode.rule_action if policy == "rule" else episode.random_action
    wins: dict[str, list[bool]] = defaultdict(list)
    try:
        for item in items:
            data_idx = int(item["item_id"].rsplit("_", 1)[1])
            for _ in range(tries):
                wins[item["category"]].append(_won(episode, act, data_idx, turn_cap, rng))
    finally:
        episode.close()
    rates = {cat: sum(v) / len(v) for cat, v in sorted(wins.items())}
    every = [w for v in wins.values() for w in v]
    rates["all"] = sum(every) / len(every) if every else 0.0
    return rates


def _won(
    episode: Episode,
    act: Callable[[random.Random], str | None],
    data_idx: int,
    turn_cap: int,
    rng: random.Random,
) -> bool:
    episode.reset(data_idx)
    for _ in range(turn_cap):
        action = act(rng)
        if action is None:
            return False
        result = episode.step(action)
        if result.done:
            return result.score > 0
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", required=True, help="env name (babyai, searchqa, ...)")
    parser.add_argument(
        "--env-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the env, as `env serve` takes it (repeatable)",
    )
    parser.add_argument(
        "--split", required=True, help="a split file (JSON rows), or the name of a declared split"
    )
    parser.add_argument("--turn-cap", type=int, default=5, help="turn cap (default 5)")
    parser.add_argument("--tries", type=int, default=10, help="episodes per task (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--policy",
        choices=POLICIES,
        default="random",
        help="random: the env's random valid action (chance); rule: its scripted rule",
    )
    args = parser.parse_args()
    env = load_env(args.env, **parse_env_options(args.env_option))
    try:
        path = Path(args.split)
        named = path.suffix == "" and len(path.parts) == 1  # `test`: a split the env declares
        items = type(env).tasks(args.split) if named else json.loads(path.read_text())
        rates = yardstick_success(env, items, args.turn_cap, args.tries, args.seed, args.policy)
    finally:
        env.close()
    width = max(map(len, rates))
    for category, rate in rates.items():
        print(f"{category:<{width}}  {rate:.3f}")


if __name__ == "__main__":
    main()
