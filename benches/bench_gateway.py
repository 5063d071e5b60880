"""The agent endpoint's cost per call against calling the engine directly, at 64 concurrent
episodes.

Both sides run the same episodes on the same stand-in engine (a fixed reply after a fixed
`--engine-ms`, no model: only the overhead shows): 64 episodes of `--turns` calls each, all in
flight at once.
(a) direct: the token-level loop's work per turn: builder ids -> `engine.generate` -> append the
    turn and the next observation (what `AgentLoop` does around a generate call);
(b) endpoint: the `openai` client's `chat.completions.create` over loopback HTTP to the gateway
    (uvicorn), which finds the episode's segment, appends the new messages' delta, generates,
    appends the turn and answers; the client sends the whole history each call, as agents do.
Printed: calls/s and milliseconds per call of each, and the key line
`gateway: <x> ms/call over the engine's <y> ms (<r>x the direct loop's time per call)`.

Then what the framework costs (`http_overhead.py`): the endpoint's own app (Starlette), the same
route on a bare-ASGI baseline and on FastAPI with a pydantic request model, each calling the
same `Gateway.complete` on an engine that answers at once, whole and streamed, at 1 and 64
concurrent callers: p50 and p99 per call, and the ratio to the baseline (target: Starlette's p50
within 10% of it).

    python benches/bench_gateway.py [--quick] [--engine-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from agentgym_rl.episode.types import Generation
from agentgym_rl.gateway.app import Gateway
from agentgym_rl.gateway.serve import GatewayServer
from agentgym_rl.trajectory import ChatTokenizer, TrajectoryBuilder
from figures import figure
from http_overhead import (
    bare_gateway,
    fastapi_gateway,
    interleaved_latencies,
    overhead_rows,
)

ROOT = Path(__file__).resolve().parents[1]
CHAT = ROOT / "tests" / "fixtures" / "templates" / "chatml"
EPISODES = 64
PATH = "/v1/chat/completions"
REPLY = "Thought: the ball is ahead.\nAction: go to red ball 1"
OBSERVATION = "You go to the red ball. You see a grey key 2 steps left and a door ahead."


class StandIn:
    """A fixed reply after a fixed delay: an engine whose cost is known."""

    def __init__(self, chat: ChatTokenizer, delay_s: float) -> None:
        self.ids = [int(i) for i in chat.encode(REPLY)] + [int(chat.eos_token_id or 0)]
        self.delay_s, self.version = delay_s, 0

    async def generate(self, prompt_ids: list[int], **kwargs: Any) -> Generation:
        await asyncio.sleep(self.delay_s)
        return Generation(self.ids, [-0.5] * len(self.ids), [0] * len(self.ids), "stop")


def start_messages(i: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are in a BabyAI grid world."},
        {"role": "user", "content": f"Your goal: go to the red ball. Episode {i}."},
    ]


async def direct(chat: ChatTokenizer, engine: StandIn, turns: int) -> float:
    async def episode(i: int) -> None:
        builder = TrajectoryBuilder(chat, start_messages(i))
        for _ in range(turns):
            gen = await engine.generate(builder.ids.tolist())
            builder.add_generated(gen.token_ids, gen.logprobs, gen.versions)
            builder.add_observation({"role": "user", "content": OBSERVATION})
        builder.finish()

    start = time.perf_counter()
    await asyncio.gather(*(episode(i) for i in range(EPISODES)))
    return time.perf_counter() - start


async def through_endpoint(chat: ChatTokenizer, engine: StandIn, turns: int) -> float:
    import openai

    gateway = Gateway(engine, chat, model="policy", max_model_len=8192, max_tokens_per_turn=64)
    server = await GatewayServer.start(gateway)

    async def episode(i: int) -> None:
        # one client per episode, as the agent runner gives each (one shared pool of 64
        # connections costs httpcore a scan of the pool per request), without TLS set-up
        http = openai.DefaultAsyncHttpxClient(verify=False, timeout=60.0)
        async with openai.AsyncOpenAI(base_url=server.url, api_key="x", http_client=http) as client:
            messages: list[Any] = start_messages(i)
            for _ in range(turns):
                reply = await client.chat.completions.create(
                    model="policy", messages=messages, user=f"ep-{i}"
                )
                messages += [
                    reply.choices[0].message.model_dump(exclude_none=True),
                    {"role": "user", "content": OBSERVATION},
                ]
        gateway.reward(f"ep-{i}", {"reward": 1.0})

    try:
        start = time.perf_counter()
        await asyncio.gather(*(episode(i) for i in range(EPISODES)))
        took = time.perf_counter() - start
        assert not gateway.episodes and len(gateway.finished) == EPISODES
        return took
    finally:
        await server.close()


async def framework_overhead(chat: ChatTokenizer, calls: int) -> dict[str, float]:
    """Starlette's and FastAPI's p50 over the bare baseline's, by (streamed, callers)."""
    apps = {
        "bare ASGI (baseline)": bare_gateway,
        "Starlette (the endpoint)": lambda gateway: gateway,
        "FastAPI + pydantic": fastapi_gateway,
    }

    def gateway() -> Gateway:  # a fresh one per app: no episode table shared between them
        return Gateway(
            StandIn(chat, 0.0), chat, model="policy", max_model_len=8192, max_tokens_per_turn=64
        )

    ratios: dict[str, float] = {}
    for stream in (False, True):
        for callers in (1, EPISODES):
            served = {name: app_of(gateway()) for name, app_of in apps.items()}

            def body(name: str, i: int, stream: bool = stream) -> dict[str, Any]:
                return {"messages": start_messages(i), "user": f"{name[:4]}-{i}", "stream": stream}

            rows = await interleaved_latencies(served, PATH, body, callers, calls)
            how = "streamed" if stream else "whole"
            title = f"endpoint, {how}, {callers} concurrent caller(s), {len(rows[0][1])} calls"
            starlette, fastapi = overhead_rows(title, rows)[1:]
            ratios[f"{how} {callers}"] = starlette
            ratios[f"{how} {callers} fastapi"] = fastapi
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns")
    parser.add_argument("--engine-ms", type=float, default=20.0, help="the stand-in's delay")
    args = parser.parse_args()
    turns = 4 if args.quick else 12
    chat = ChatTokenizer.from_dir(CHAT)
    engine = StandIn(chat, args.engine_ms / 1000)
    calls = EPISODES * turns
    a = asyncio.run(direct(chat, engine, turns))
    b = asyncio.run(through_endpoint(chat, engine, turns))
    print(f"{EPISODES} concurrent episodes x {turns} calls, engine {args.engine_ms:g} ms a call")
    for name, took in (("direct", a), ("endpoint", b)):
        print(f"  {name:9s} {calls / took:8.1f} calls/s  {1000 * took / calls:7.2f} ms/call")
    print(
        f"gateway: {1000 * b / calls:.2f} ms/call over the engine's {args.engine_ms:g} ms "
        f"({b / a:.2f}x the direct loop's time per call)"
    )
    figure(
        "gateway", "a call through the endpoint", 1000 * b / calls, "ms", ceiling=1000 * a / calls,
        ceiling_name="the direct loop", lower_is_better=True,
    )  # fmt: skip
    ratios = asyncio.run(framework_overhead(chat, 128 if args.quick else 2000))
    worst = max(v for k, v in ratios.items() if not k.endswith("fastapi"))
    print(f"Starlette p50 over bare ASGI: worst {worst:.2f}x (target <= 1.10)")
    figure(
        "gateway", "endpoint p50 on Starlette, worst case", worst, "x bare ASGI",
        target="<= 1.10", lower_is_better=True,
    )  # fmt: skip


if __name__ == "__main__":
    main()
