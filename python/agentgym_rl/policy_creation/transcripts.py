"""Transcripts of random valid actions, played on the env code itself (no server, no expert).

Contract: `play_transcripts(env, tasks, ...)` plays each task once in-process with the env's own
random actions (`Episode.random_action`: uniform over the available actions, or for SearchQA a
query of the question's words, then an entity of the passages shown), and returns the chat an
agent would have had: the system prompt the rollout servers use (`episode/prompts.py`), the
first observation, then assistant turns in the env's action format (`Action: <action>` after a
`Thought:` line restating the goal with `thought_line`; the bare tag for SearchQA) and
observation user turns, exactly as the agent loop renders them. Nothing here knows how to solve
a task: the transcripts carry the format only, which is what the tokenizer is trained on and
what the format warm-up teaches. The one exception is a probe, not a base policy: `policy="rule"`
plays the env's scripted rule (`Episode.rule_action`), whose transcripts measure whether a model
can imitate reading its task at all (docs/results/reading-the-goal/).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentgym_rl.config import ActionFormat
from agentgym_rl.env_discovery import env_traits, load_env
from agentgym_rl.episode.actions import env_format, render_action
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.prompts import episode_prefix, observation_message
from agentgym_rl.episode.tools import ToolFamily, ToolSet, tool_message, write_call


@dataclass(frozen=True, slots=True)
class Transcript:
    """One played episode: its chat messages and whether the random actions happened to succeed."""

    item_id: str
    messages: list[dict[str, str]]
    success: bool
    tools: list[dict[str, Any]] | None = None
    """Tool mode: the schemas the system turn is rendered with."""


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


def play_transcripts(
    env: str,
    tasks: Sequence[Task],
    *,
    turn_cap: int,
    seed: int = 0,
    system_prompt: str | None = None,
    env_options: dict[str, str] | None = None,
    thought_line: str | None = None,
    environment: Any = None,
    action_format: ActionFormat | None = None,
    on_played: Callable[[int], None] | None = None,
    policy: str = "random",
) -> list[Transcript]:
    """Play every task once with the env's random valid actions (`policy="rule"`: its scripted
    rule, for the imitation probe only), at most `turn_cap` turns
    (`env_options`: the env's own options, as `env serve --env-option` gives them).

    `thought_line`: each action follows a `Thought:` line restating the observation's line with
    this prefix (e.g. "Goal:"). It restates what the agent was told, never which action to pick:
    the actions stay uniformly random. `environment`: an env already built from these options
    (the caller's to close); by default one is built here. `action_format` (default: the env's):
    TOOLS writes each action as the Qwen-style call of the env's tool that stands for it
    (`write_call`), answered by a `tool` message, with the tools' schemas on the transcript.
    `on_played(k)` is called after the k-th transcript (a browser env plays ~2 a second)."""
    if environment is None:
        built = load_env(env, **(env_options or {}))
        try:
            return play_transcripts(
                env,
                tasks,
                turn_cap=turn_cap,
                seed=seed,
                system_prompt=system_prompt,
                thought_line=thought_line,
                environment=built,
                action_format=action_format,
                on_played=on_played,
                policy=policy,
            )
        finally:
            built.close()
    rng = random.Random(seed)
    fmt = action_format or env_format(env)
    tools = ToolSet.from_wire(env_traits(env).tools) if fmt is ActionFormat.TOOLS else None
    out: list[Transcript] = []
    episode = environment.new_episode()  # type: ignore[attr-defined]
    if policy not in ("random", "rule"):
        raise ValueError(f"policy must be random or rule, not {policy!r}")
    if policy == "rule" and type(environment).rule is None:
        episode.close()
        raise ValueError(f"env {env!r} declares no scripted rule to play (Environment.rule)")
    act = episode.rule_action if policy == "rule" else episode.random_action
    try:
        for task in tasks:
            first = episode.reset(task.data_idx)
            observation = first.observation
            messages = episode_prefix(env, observation, fmt, system_prompt)
            success = False
            for turn in range(turn_cap):
                action = act(rng)
                if action is None:
                    break
                thought = thought_from(observation, thought_line)
                if tools is None:
                    turn_text = render_action(action, fmt, thought)
                else:
                    turn_text = _call_text(tools, action, thought)
                messages.append({"role": "assistant", "content": turn_text})
                result = episode.step(action)
                observation = result.observation
                if result.done:
                    success = result.score > 0
                    break
                if turn + 1 < turn_cap:
                    reply = observation_message(observation)
                    if tools is not None:
                        reply = tool_message(observation, f"call_{turn + 1}_0")
                    messages.append(reply)
            schemas = tools.schemas if tools is not None else None
            out.append(Transcript(task.item_id, messages, success, schemas))
            if on_played is not None:
                on_played(len(out))
    finally:
        episode.close()
    return out


def _call_text(tools: ToolSet, action: str, thought: str | None) -> str:
    call = tools.call_for(action)
    if call is None:
        raise ValueError(f"no tool of the env writes its action {action!r}: declare one")
    text = write_call(call, ToolFamily.HERMES)
    return text if thought is None else f"{thought}\n{text}"


def call_pieces(transcripts: Iterable[Transcript]) -> list[str]:
    """The fixed text of the Qwen-style calls of tool transcripts' tools: each tool's opening up
    to its first argument's value (`<tool_call>\n{"name": "search", "arguments": {"query": "`,
    the quote included for a string), the joints between arguments and the closings
    (`"}}\n</tool_call>`). As single tokens, a tiny model writes a well-formed call as soon as
    it picks the tool: the format costs it little to learn, the choice stays its own."""
    pieces: set[str] = set()
    for schema in (s for t in transcripts for s in t.tools or ()):
        fn = schema["function"]
        params = fn.get("parameters", {}).get("properties", {})
        names = list(params)
        opening = f'<tool_call>\n{{"name": {json.dumps(fn["name"])}, "arguments": {{'
        if not names:
            pieces.add(opening + "}}\n</tool_call>")
            continue
        quote = '"' if params[names[0]].get("type", "string") == "string" else ""
        pieces.add(f"{opening}{json.dumps(names[0])}: {quote}")
        pieces.update(f", {json.dumps(p)}: " for p in names[1:])
        pieces.update(['"}}\n</tool_call>', "}}\n</tool_call>"])
    return sorted(pieces)


def corpus_text(transcripts: Iterable[Transcript]) -> list[str]:
    """Every message as the chat template shows it, role line included (the tokenizer's corpus:
    role names then become single tokens too), and the tool schemas of tool transcripts."""
    out = [f"{m['role']}\n{m['content']}" for t in transcripts for m in t.messages]
    out += [json.dumps(schema, ensure_ascii=False) for t in transcripts for schema in t.tools or ()]
    return out


__all__ = ["Transcript", "call_pieces", "corpus_text", "play_transcripts", "thought_from"]
