"""Native tool calls against the env's own text format, on the same episodes: tokens per turn and
parse time per call.

For each env, random episodes are played in process (`Episode.random_action`); every action is
written both ways: in the env's text format (ReAct `Action:` line, Search-R1 tag, WebArena fence;
`render_action`) and as the Hermes/Qwen tool call of the env's tool that stands for it
(`ToolSet.call_for` + `write_call`). Tokens are counted with the Qwen2.5-shaped golden fixture's
tokenizer (a small BPE trained here: absolute counts are larger than a real Qwen vocabulary's,
the ratio is what to read); the system turn's extra tokens for the tool schemas are printed once
per env. Parse time is `parse_action` against `ToolReader.read` (JSON parse + schema check +
action template) per turn. One key line per env:
`<env>: tools <t> tok/turn vs <fmt> <r> tok/turn (<x>x); parse <a> us vs <b> us; schemas +<n> tok`.

    python benches/bench_tools.py [--quick]
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from agentgym_rl.env_discovery import env_traits, load_env
from agentgym_rl.episode.actions import env_format, parse_action, render_action
from agentgym_rl.episode.tools import ToolFamily, ToolReader, ToolSet, write_call
from agentgym_rl.trajectory import ChatTokenizer
from figures import figure

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT / "tests" / "fixtures" / "templates" / "qwen25_tools"
ENVS = {"babyai": {}, "textcraft": {}, "maze": {}, "searchqa": {"retriever": "bm25"}}


def actions_of(env: str, episodes: int, turns: int) -> list[str]:
    """The random actions of `episodes` episodes (at most `turns` each) of `env`."""
    built = load_env(env, **ENVS[env])
    rng, out = random.Random(0), []
    try:
        episode = built.new_episode()
        for idx in range(episodes):
            episode.reset(idx)
            for _ in range(turns):
                action = episode.random_action(rng)
                if action is None:
                    break
                out.append(action)
                if episode.step(action).done:
                    break
        episode.close()
    finally:
        built.close()
    return out


def per_call_us(parse: object, texts: list[str], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        for text in texts:
            parse(text)  # type: ignore[operator]
    return 1e6 * (time.perf_counter() - start) / (repeat * len(texts))


def bench(env: str, chat: ChatTokenizer, episodes: int, repeat: int) -> str:
    tools = ToolSet.from_wire(env_traits(env).tools)
    reader = ToolReader(tools, ToolFamily.HERMES)
    fmt = env_format(env)
    actions = [a for a in actions_of(env, episodes, 6) if tools.call_for(a) is not None]
    texts = [render_action(a, fmt) for a in actions]
    calls = [write_call(tools.call_for(a), ToolFamily.HERMES) for a in actions]  # type: ignore[arg-type]
    assert all(reader.read(c, 0).steps[0].action == a for c, a in zip(calls, actions, strict=True))
    text_tokens = sum(len(chat.encode(t)) for t in texts) / len(texts)
    call_tokens = sum(len(chat.encode(c)) for c in calls) / len(calls)
    system = [{"role": "system", "content": "s"}]
    schemas = len(chat.apply_chat_template(system, tools=tools.schemas)) - len(
        chat.apply_chat_template(system)
    )
    text_us = per_call_us(lambda t: parse_action(t, fmt), texts, repeat)
    call_us = per_call_us(lambda c: reader.read(c, 0), calls, repeat)
    print(
        f"  {env}: {len(actions)} turns; {fmt.value} {text_tokens:.1f} tok/turn, "
        f"{text_us:.1f} us/parse; tools {call_tokens:.1f} tok/turn, {call_us:.1f} us/call; "
        f"{len(tools.tools)} tool schemas +{schemas} tok in the system turn"
    )
    figure(
        "tools", f"{env} turn as a tool call", call_tokens, "tokens", baseline=text_tokens,
        baseline_name=f"{fmt.value} text", lower_is_better=True,
    )  # fmt: skip
    return (
        f"{env}: tools {call_tokens:.1f} tok/turn vs {fmt.value} {text_tokens:.1f} tok/turn "
        f"({call_tokens / text_tokens:.2f}x); parse {call_us:.1f} us vs {text_us:.1f} us "
        f"({call_us / text_us:.2f}x); schemas +{schemas} tok"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer episodes and repeats")
    args = parser.parse_args()
    episodes, repeat = (4, 20) if args.quick else (30, 200)
    chat = ChatTokenizer.from_dir(TOKENIZER)
    print(f"tool calls vs text actions ({episodes} random episodes per env)")
    keys = [bench(env, chat, episodes, repeat) for env in ENVS]
    print()
    for key in keys:
        print(key)


if __name__ == "__main__":
    main()
