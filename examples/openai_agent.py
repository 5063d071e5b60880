"""An agent as people write them: a ReAct loop against the official `openai` client, over the
BabyAI env server's HTTP API (AgentGym's /create, /reset, /step, /close). Nothing here knows it
is being trained: `agent.function: examples.openai_agent:agent` in a train config runs it
unchanged, its client pointed at the rollout server's endpoint, and so does
`agent.command: [python, examples/openai_agent.py]`, one process per episode (docs/agents.md)."""

from __future__ import annotations

import re
from typing import Any

import httpx
from openai import AsyncOpenAI

SYSTEM = (
    "You are in a BabyAI grid world. Reply with a line 'Thought: <your goal>', then one line "
    "'Action: <action>', an available action."
)
ACTION = re.compile(r"^\s*action\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)


async def agent(client: AsyncOpenAI, task: Any) -> float:
    """Play `task` (its `env_url`, `data_idx` and `turn_cap`); the reward is the env's score."""
    async with httpx.AsyncClient(base_url=task.env_url, timeout=60.0) as env:
        episode = (await env.post("/create", json={})).json()["id"]
        try:
            reset = await env.post("/reset", json={"id": episode, "data_idx": task.data_idx})
            messages = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": reset.json()["observation"]},
            ]
            score = 0.0
            for _ in range(task.turn_cap):
                reply = await client.chat.completions.create(model="policy", messages=messages)
                text = reply.choices[0].message.content or ""
                messages.append({"role": "assistant", "content": text})
                found = ACTION.findall(text)
                action = found[-1].strip() if found else text.strip()
                step = (await env.post("/step", json={"id": episode, "action": action})).json()
                score = float(step.get("score", step.get("reward", 0.0)))
                if step["done"]:
                    break
                messages.append({"role": "user", "content": step["observation"]})
            return score
        finally:
            await env.post("/close", json={"id": episode})


def main() -> None:
    """The same agent as a command line (`agent.command: [python, examples/openai_agent.py]`):
    the task and episode key from the environment, the client from OPENAI_BASE_URL and
    OPENAI_API_KEY, the reward printed last as `{"reward": x}`."""
    import asyncio
    import json
    import os
    from types import SimpleNamespace

    task = SimpleNamespace(**json.loads(os.environ["AGENTGYM_TASK"]))

    async def play() -> float:
        key = os.environ["AGENTGYM_EPISODE_KEY"]
        async with AsyncOpenAI(default_headers={"X-Episode-Key": key}) as client:
            return await agent(client, task)

    print(json.dumps({"reward": asyncio.run(play())}))


if __name__ == "__main__":
    main()
