"""How often a TextCraft policy names only items its task lists, by policy version.

    python scripts/textcraft_listed_actions.py runs/textcraft_shallow [--model DIR] [--every 5]

Reads a run's logged training episodes (`rollout-*/episodes.jsonl`), decodes them with the run's
tokenizer and, per bucket of dispatch versions, prints the episodes' success rate and the share of
their `get`/`craft` actions whose every item appears in the task's listed crafting commands. A
policy that copies from the listing scores near 1 (random valid actions score exactly 1); one that
writes items from memory scores low: the diagnosis behind docs/results/textcraft-shallow.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

_COMMAND = re.compile(r"craft \d+ (.+?) using (.+)")
_GET = re.compile(r"get \d+ (.+)")
_ACTION = re.compile(r"Action: (.*?)<\|im_end\|>")


def listed_items(first_observation: str) -> set[str]:
    """Every item the reset observation's crafting commands name."""
    names: set[str] = set()
    for line in first_observation.splitlines():
        if m := _COMMAND.fullmatch(line):
            names.add(m[1])
            names |= {part.split(" ", 1)[-1] for part in m[2].split(", ")}
    return names


def action_items(action: str) -> list[str]:
    """The items a get or craft names; none for anything else."""
    if m := _GET.fullmatch(action):
        return [m[1]]
    if m := _COMMAND.fullmatch(action):
        return [m[1]] + [part.split(" ", 1)[-1] for part in m[2].split(", ")]
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run folder (its rollout-*/episodes.jsonl)")
    parser.add_argument("--model", help="tokenizer folder (default: the one each episode names)")
    parser.add_argument("--every", type=int, default=5, help="versions per bucket (default 5)")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    tokenizers: dict[str, object] = {}
    buckets: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for path in sorted(args.run.glob("rollout-*/episodes.jsonl")):
        for line in path.open():
            episode = json.loads(line)
            source = args.model or episode["tokenizer"]
            if source not in tokenizers:
                tokenizers[source] = AutoTokenizer.from_pretrained(source)
            text = tokenizers[source].decode(episode["input_ids"])  # type: ignore[attr-defined]
            first = text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
            listed = listed_items(first)
            bucket = buckets[episode["dispatch_version"] // args.every * args.every]
            bucket[2] += 1
            bucket[3] += bool(episode["success"])
            for action in _ACTION.findall(text):
                items = action_items(action.strip())
                bucket[0] += bool(items)
                bucket[1] += bool(items) and all(item in listed for item in items)
    print("| versions | episodes | success | get/craft actions | naming listed items only |")
    print("|---|---:|---:|---:|---:|")
    for version, (acts, listed_only, episodes, wins) in sorted(buckets.items()):
        share = listed_only / acts if acts else 0.0
        print(
            f"| {version}-{version + args.every - 1} | {episodes} | {wins / episodes:.3f} "
            f"| {acts} | {share:.2f} |"
        )


if __name__ == "__main__":
    main()
