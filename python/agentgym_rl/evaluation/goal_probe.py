"""Does a policy read its goal? Two probes on BabyAI's first turns, outside any run.

Contract: `probe_goals(model_dir, tasks, system_prompt=...)` resets each BabyAI task (compact
observation) in this process, renders the episode's first prompt exactly as the agent loop does
(the model's chat template, the run's system prompt) and decodes the policy's first turn greedily
with transformers, twice:
- as it is: does the `Thought:` line name the goal (the `Goal:` line's text); does the action
  reach the goal's object (`go to` it, or `pick up` it, which faces it first) when the goal is
  listed, and turn to look when it is not (what the scripted rule does);
- with the `Goal:` line swapped for another listed object's goal (one whose colour or type
  differs): does the action follow the swapped goal? A policy that reads its goal follows it; one
  that learned where goals usually are does not.
Only tasks whose first observation lists at least two objects the `go to` verb reaches are
probed. `probe_policy(first_turn, tasks)` runs the same probes on any policy (a function from
the first observation to a reply). `GoalProbe` holds the shares, overall and per category;
`main()` is the command line:

    python -m agentgym_rl.evaluation.goal_probe --model runs/models/babyai-goto-2m \
        --split envs/agentgym_envs/babyai/data/goto_test.json --system-prompt "..."
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym_envs.babyai.env import fits_mission
from agentgym_rl.config import ActionFormat
from agentgym_rl.env_discovery import load_env
from agentgym_rl.episode.actions import parse_action
from agentgym_rl.episode.dataset import Task, load_split
from agentgym_rl.episode.prompts import episode_prefix

GOAL = "Goal: "
VERB = "go to "


@dataclass
class Shares:
    """Counts of one set of probed tasks."""

    tasks: int = 0
    thought_names_goal: int = 0
    goal_listed: int = 0
    action_does_goal: int = 0
    """Of the tasks whose goal is listed."""
    goal_unlisted: int = 0
    action_turns: int = 0
    """Of the tasks whose goal is not listed: the action turns to look (what the rule does)."""
    swapped: int = 0
    action_follows_swap: int = 0
    action_does_old_goal_after_swap: int = 0

    def rates(self) -> dict[str, float | int]:
        def share(k: int, n: int) -> float:
            return k / n if n else 0.0

        return {
            "tasks": self.tasks,
            "thought_names_goal": share(self.thought_names_goal, self.tasks),
            "goal_listed": self.goal_listed,
            "does_listed_goal": share(self.action_does_goal, self.goal_listed),
            "goal_unlisted": self.goal_unlisted,
            "turns_when_unlisted": share(self.action_turns, self.goal_unlisted),
            "swaps": self.swapped,
            "follows_swapped_goal": share(self.action_follows_swap, self.swapped),
            "keeps_old_goal": share(self.action_does_old_goal_after_swap, self.swapped),
        }


@dataclass
class GoalProbe:
    """The probes' shares, over all probed tasks and per category, and a few examples."""

    overall: Shares = field(default_factory=Shares)
    by_category: dict[str, Shares] = field(default_factory=lambda: defaultdict(Shares))
    examples: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "overall": self.overall.rates(),
            "by_category": {c: s.rates() for c, s in sorted(self.by_category.items())},
            "examples": self.examples,
        }


def goal_of(observation: str) -> str | None:
    """The text of the observation's `Goal:` line (compact BabyAI), e.g. 'go to red ball'."""
    line = next((x for x in observation.splitlines() if x.startswith(GOAL)), None)
    return None if line is None else line.removeprefix(GOAL).strip()


def listed_goals(observation: str) -> list[str]:
    """The goals the listed `go to` actions would do, without their index, in order:
    'go to red ball 1' -> 'go to red ball'."""
    line = next((x for x in observation.splitlines() if x.startswith("Actions: ")), "")
    actions = [a.strip() for a in line.removeprefix("Actions: ").split(",")]
    goals = [a.rsplit(" ", 1)[0] for a in actions if a.startswith(VERB)]
    return list(dict.fromkeys(goals))


def swap_goal(observation: str, goal: str) -> str:
    """The observation with its `Goal:` line saying `goal`."""
    return "\n".join(f"{GOAL}{goal}" if x.startswith(GOAL) else x for x in observation.splitlines())


class _Policy:
    """Greedy first turns of an HF checkpoint, prompted as the agent loop prompts it."""

    def __init__(self, model_dir: Path, system_prompt: str | None, max_new_tokens: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model: Any = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        self.model.eval()
        self.system_prompt = system_prompt
        self.max_new_tokens = max_new_tokens

    def first_turn(self, observation: str) -> str:
        messages = episode_prefix("babyai", observation, ActionFormat.REACT, self.system_prompt)
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        ids = self.tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with self._torch.no_grad():
            out = self.model.generate(
                ids,
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id or 0,
                eos_token_id=self.tokenizer.convert_tokens_to_ids("<|im_end|>"),
            )
        return str(self.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))


def reaches(action: str, goal: str) -> bool:
    """Whether `action` walks to the goal's object: "go to X k", or "pick up X k", which faces X
    first (and so completes a go-to mission on the way)."""
    for verb in ("go to ", "pick up "):
        if action.startswith(verb):
            return fits_mission(f"go to {action.removeprefix(verb)}", goal)
    return False


def _thought(reply: str) -> str:
    line = next((x for x in reply.splitlines() if x.lower().startswith("thought:")), "")
    return line.split(":", 1)[1].strip() if line else ""


def probe_goals(
    model_dir: Path,
    tasks: Sequence[Task],
    *,
    system_prompt: str | None = None,
    max_new_tokens: int = 24,
    seed: int = 0,
    examples: int = 5,
) -> GoalProbe:
    """Run both probes with an HF checkpoint's greedy first turns (`probe_policy`)."""
    policy = _Policy(model_dir, system_prompt, max_new_tokens)
    return probe_policy(policy.first_turn, tasks, seed=seed, examples=examples)


def probe_policy(
    first_turn: Callable[[str], str],
    tasks: Sequence[Task],
    *,
    seed: int = 0,
    examples: int = 5,
) -> GoalProbe:
    """Run both probes on every task of `tasks` whose first view lists two or more goals;
    `first_turn` is the policy: a first observation in, its reply out."""
    rng = random.Random(seed)
    env = load_env("babyai", observation="compact")
    episode = env.new_episode()
    result = GoalProbe()
    try:
        for task in tasks:
            observation = episode.reset(task.data_idx).observation
            goal, listed = goal_of(observation), listed_goals(observation)
            if goal is None or len(listed) < 2:
                continue
            counts = (result.overall, result.by_category[task.category or "-"])
            reply = first_turn(observation)
            action = parse_action(reply, ActionFormat.REACT).action or ""
            listed_goal = any(fits_mission(f"{g} 1", goal) for g in listed)
            for c in counts:
                c.tasks += 1
                c.thought_names_goal += _thought(reply) == goal
                if listed_goal:
                    c.goal_listed += 1
                    c.action_does_goal += reaches(action, goal)
                else:
                    c.goal_unlisted += 1
                    c.action_turns += action in ("turn left", "turn right")
            others = [g for g in listed if not fits_mission(f"{g} 1", goal)]
            if not others:
                continue
            other = rng.choice(others)
            swapped = first_turn(swap_goal(observation, other))
            moved = parse_action(swapped, ActionFormat.REACT).action or ""
            for c in counts:
                c.swapped += 1
                c.action_follows_swap += reaches(moved, other)
                c.action_does_old_goal_after_swap += reaches(moved, goal)
            if len(result.examples) < examples:
                result.examples.append(
                    {"goal": goal, "reply": reply, "swapped_goal": other, "swapped_reply": swapped}
                )
    finally:
        episode.close()
        env.close()
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="an HF checkpoint folder")
    parser.add_argument("--split", type=Path, required=True, help="a BabyAI split file")
    parser.add_argument("--system-prompt", default=None, help="the run's system prompt")
    parser.add_argument("--limit", type=int, default=None, help="the first N tasks only")
    parser.add_argument("--out", type=Path, default=None, help="write the shares as JSON here")
    args = parser.parse_args(argv)
    tasks = load_split(args.split, "babyai")[: args.limit]
    figures = probe_goals(args.model, tasks, system_prompt=args.system_prompt).to_dict()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=1) + "\n")
    rows = [("all", figures["overall"]), *figures["by_category"].items()]
    head = ("tasks", "n", "thought=goal", "listed", "does it", "unlisted", "turns", "follows swap")
    print("{:<16} {:>4} {:>12} {:>6} {:>7} {:>8} {:>5} {:>12}".format(*head))
    for name, r in rows:
        print(
            f"{name:<16} {r['tasks']:>4} {r['thought_names_goal']:>12.3f} {r['goal_listed']:>6} "
            f"{r['does_listed_goal']:>7.3f} {r['goal_unlisted']:>8} "
            f"{r['turns_when_unlisted']:>5.3f} {r['follows_swapped_goal']:>12.3f}"
        )


if __name__ == "__main__":
    main()


__all__ = ["GoalProbe", "goal_of", "listed_goals", "probe_goals", "probe_policy", "swap_goal"]
