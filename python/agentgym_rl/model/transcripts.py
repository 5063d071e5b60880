"""Transcripts of random valid actions, played on the env code itself (no server, no expert).

Contract: `random_transcripts(env, tasks, ...)` plays each task once in-process with actions drawn
uniformly from the env's available actions, and returns the chat an agent would have had: the
system prompt the rollout servers use (`episode/prompts.py`), the first observation, then
`Action: <action>` assistant turns (after a `Thought:` line restating the goal, with
`thought_line`) and observation user turns, exactly as the agent loop renders them. Nothing
here knows how to solve a task: the transcripts carry the format only, which is what the
tokenizer is trained on and what the format warm-up teaches.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agentgym_rl.config import ActionFormat
from agentgym_rl.env_discovery import load_env
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.prompts import episode_prefix, observation_message

# "check available actions" repeats what every BabyAI observation already lists: a random
# policy that picks it wastes turns, and it teaches the model nothing about the format.
_SKIPPED_ACTIONS = frozenset({"check available actions"})


@dataclass(frozen=True, slots=True)
class Transcript:
    """One played episode: its chat messages and whether the random actions happened to succeed."""

    item_id: str
    messages: list[dict[str, str]]
    success: bool


def assistant_turn(action: str, thought: str | None = None) -> str:
    """The assistant message that plays `action` (the ReAct parser reads the `Action:` line),
    after a `Thought:` line when one is given."""
    if thought is None:
        return f"Action: {action}"
    return f"Thought: {thought}\nAction: {action}"


def thought_from(observation: str, line_prefix: str | None) -> str | None:
    """The rest of the observation's first line that starts with `line_prefix` (e.g. the goal
    after "Goal:"): the thought a transcript restates before its action. None without a prefix
    or such a line."""
    if line_prefix is None:
        return None
    for line in observation.splitlines():
        if line.startswith(line_prefix):
            return line[len(line_prefix) :].strip() or None
    return None


def random_transcripts(
    env: str,
    tasks: Sequence[Task],
    *,
    max_turns: int,
    seed: int = 0,
    system_prompt: str | None = None,
    env_options: dict[str, str] | None = None,
    thought_line: str | None = None,
) -> list[Transcript]:
    """Play every task once with uniformly random valid actions, at most `max_turns` turns
    (`env_options`: the env's own options, as `env serve --env-option` gives them).

    `thought_line`: each action follows a `Thought:` line restating the observation's line with
    this prefix (e.g. "Goal:"). It restates what the agent was told, never which action to pick:
    the actions stay uniformly random."""
    environment = load_env(env, **(env_options or {}))
    rng = random.Random(seed)
    out: list[Transcript] = []
    episode = environment.new_episode()  # type: ignore[attr-defined]
    try:
        for task in tasks:
            first = episode.reset(task.data_idx)
            observation = first.observation
            messages = episode_prefix(env, observation, ActionFormat.REACT, system_prompt)
            success = False
            for turn in range(max_turns):
                choices = [a for a in episode.available_actions() if a not in _SKIPPED_ACTIONS]
                if not choices:
                    break
                action = rng.choice(choices)
                thought = thought_from(observation, thought_line)
                messages.append({"role": "assistant", "content": assistant_turn(action, thought)})
                result = episode.step(action)
                observation = result.observation
                if result.done:
                    success = result.score > 0
                    break
                if turn + 1 < max_turns:
                    messages.append(observation_message(result.observation))
            out.append(Transcript(task.item_id, messages, success))
    finally:
        episode.close()
    return out


def corpus_text(transcripts: Iterable[Transcript]) -> list[str]:
    """Every message as the chat template shows it, role line included (the tokenizer's corpus:
    role names then become single tokens too)."""
    return [f"{m['role']}\n{m['content']}" for t in transcripts for m in t.messages]


__all__ = ["Transcript", "assistant_turn", "corpus_text", "random_transcripts", "thought_from"]
