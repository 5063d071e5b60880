"""The chance level of a BabyAI split: success of a policy that picks a uniformly random available
action every turn, per category. The yardstick for a base policy that "picks like chance".

    python -m agentgym_envs.babyai.chance \
        --split envs/agentgym_envs/babyai/data/goto_test.json --max-turns 5 --tries 10

GoTo levels have a high chance level: going to a seen object is one action, so a random pick
among a handful of listed actions often names the goal.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

from agentgym_envs.babyai.env import CHECK, BabyAIEpisode


def chance_success(
    items: list[dict[str, str]], max_turns: int, tries: int, seed: int = 0
) -> dict[str, float]:
    """Success rate of random valid actions over `tries` episodes per task: per category, and
    over all episodes under "all". `items` are split rows ({"item_id": "babyai_<id>", "category"})."""
    if max_turns < 1 or tries < 1:
        raise ValueError(f"max_turns and tries must be >= 1 (got {max_turns}, {tries})")
    rng = random.Random(seed)
    episode = BabyAIEpisode(compact=True)
    wins: dict[str, list[bool]] = defaultdict(list)
    try:
        for item in items:
            data_idx = int(item["item_id"].removeprefix("babyai_"))
            for _ in range(tries):
                episode.reset(data_idx)
                won = False
                for _ in range(max_turns):
                    actions = [a for a in episode.available_actions() if a != CHECK]
                    result = episode.step(rng.choice(actions))
                    if result.done:
                        won = result.score > 0
                        break
                wins[item["category"]].append(won)
    finally:
        episode.close()
    rates = {cat: sum(v) / len(v) for cat, v in sorted(wins.items())}
    every = [w for v in wins.values() for w in v]
    rates["all"] = sum(every) / len(every) if every else 0.0
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", type=Path, required=True, help="a split file (JSON rows)")
    parser.add_argument("--max-turns", type=int, default=5, help="turn cap (default 5)")
    parser.add_argument("--tries", type=int, default=10, help="episodes per task (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    items = json.loads(args.split.read_text())
    rates = chance_success(items, args.max_turns, args.tries, args.seed)
    width = max(map(len, rates))
    for category, rate in rates.items():
        print(f"{category:<{width}}  {rate:.3f}")


if __name__ == "__main__":
    main()
