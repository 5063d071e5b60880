"""The chance level of a split: success of a policy that plays the env's own random valid action
every turn (`Episode.random_action`: BabyAI a uniformly random available action, SearchQA a
search for a run of the question's words, then an entity of the passages shown), per category.
The yardstick for a base policy that "picks like chance".

    python -m agentgym_envs.chance --env babyai --env-option observation=compact \
        --split envs/agentgym_envs/babyai/data/goto_test.json --turn-cap 5 --tries 10

GoTo levels have a high chance level: going to a seen object is one action, so a random pick
among a handful of listed actions often names the goal.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

from agentgym_envs import load_env
from agentgym_envs.server.base import Environment
from agentgym_envs.server.options import parse_env_options


def chance_success(
    env: Environment, items: list[dict[str, str]], turn_cap: int, tries: int, seed: int = 0
) -> dict[str, float]:
    """Success rate of random valid actions over `tries` episodes per task: per category, and
    over all episodes under "all". `items` are split rows ({"item_id": "<env>_<id>", "category"})."""
    if turn_cap < 1 or tries < 1:
        raise ValueError(f"turn_cap and tries must be >= 1 (got {turn_cap}, {tries})")
    rng = random.Random(seed)
    episode = env.new_episode()
    wins: dict[str, list[bool]] = defaultdict(list)
    try:
        for item in items:
            data_idx = int(item["item_id"].rsplit("_", 1)[1])
            for _ in range(tries):
                wins[item["category"]].append(_won(episode, data_idx, turn_cap, rng))
    finally:
        episode.close()
    rates = {cat: sum(v) / len(v) for cat, v in sorted(wins.items())}
    every = [w for v in wins.values() for w in v]
    rates["all"] = sum(every) / len(every) if every else 0.0
    return rates


def _won(episode: object, data_idx: int, turn_cap: int, rng: random.Random) -> bool:
    episode.reset(data_idx)  # type: ignore[attr-defined]
    for _ in range(turn_cap):
        action = episode.random_action(rng)  # type: ignore[attr-defined]
        if action is None:
            return False
        result = episode.step(action)  # type: ignore[attr-defined]
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
    args = parser.parse_args()
    env = load_env(args.env, **parse_env_options(args.env_option))
    try:
        path = Path(args.split)
        named = path.suffix == "" and len(path.parts) == 1  # `test`: a split the env declares
        items = type(env).tasks(args.split) if named else json.loads(path.read_text())
        rates = chance_success(env, items, args.turn_cap, args.tries, args.seed)
    finally:
        env.close()
    width = max(map(len, rates))
    for category, rate in rates.items():
        print(f"{category:<{width}}  {rate:.3f}")


if __name__ == "__main__":
    main()
