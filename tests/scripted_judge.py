"""A scripted OpenAI-compatible judge (ASGI, Starlette): the "oracle" judge of BabyAI episodes,
served through the same chat-completions path a model judge is, and its failure modes.

Every `POST /v1/chat/completions` reads the prompt a judge gets (`judging/rubric.py`) and
answers as its `model` says (dash-separated words, so one server plays every judge a test needs):
- `oracle`: the env's truth from the transcript: an attempt scores 1 when the env said so
  (BabyAI's "You completed the goal.", Deep Search's "Correct: ...", TextCraft's "Crafted N
  <the goal's item>"), else 0. A group prompt ("Attempt k:" sections) gets one `k: x` line
  per attempt, an episode prompt `SCORE: x`.
- `garbage`: a reply with no score; `once`: the first reply to each prompt (of this model)
  has none, the second is the oracle's.
- `flaky<N>`: this model's first N requests are answered 503; `slow<S>`: every reply waits S
  seconds (e.g. `oracle-slow0.5`, `oracle-flaky2`).
`$JUDGE_KEY`, when set, is the bearer token a request must carry (else 401). `GET /health`
answers 200 (a local judge server's readiness); `GET /stats`
counts requests (`requests:<model>` by model), refusals by status, replies by kind and, by
model, the most requests open at once (`max_open:<model>`).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import Counter
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

SUCCESS = ("You completed the goal.", "Correct: your answer matches the expected one.")
TEXTCRAFT_GOAL = re.compile(r"^Goal: craft (.+?)\.$", re.M)
STATS: Counter[str] = Counter()
_SEEN: Counter[str] = Counter()


def succeeded(text: str, goal: str | None) -> bool:
    crafted = goal is not None and re.search(
        rf"environment: Crafted \d+ {re.escape(goal)}$", text, re.M
    )
    return any(s in text for s in SUCCESS) or bool(crafted)


def oracle(prompt: str) -> str:
    goal = TEXTCRAFT_GOAL.search(prompt)
    item = goal.group(1) if goal else None
    attempts = re.split(r"^Attempt \d+:$", prompt, flags=re.M)[1:]
    if not attempts:
        return f"SCORE: {int(succeeded(prompt, item))}"
    return "\n".join(f"{k}: {int(succeeded(a, item))}" for k, a in enumerate(attempts, 1))


def reply_to(words: list[str], prompt: str) -> str:
    seen = f"{'-'.join(words)}\n{prompt}"
    _SEEN[seen] += 1
    if "garbage" in words or ("once" in words and _SEEN[seen] == 1):
        STATS["garbage"] += 1
        return "I think the agent did fine overall."
    STATS["oracle"] += 1
    return oracle(prompt)


def _number(words: list[str], prefix: str) -> float:
    return next((float(w[len(prefix) :]) for w in words if w.startswith(prefix)), 0.0)


async def complete(request: Request) -> JSONResponse:
    body: dict[str, Any] = await request.json()
    model = str(body.get("model", "oracle"))
    words = model.split("-")
    STATS["requests"] += 1
    STATS[f"requests:{model}"] += 1
    if STATS[f"requests:{model}"] <= _number(words, "flaky"):
        STATS["503"] += 1
        return JSONResponse({"error": {"message": "warming up"}}, status_code=503)
    key = os.environ.get("JUDGE_KEY")
    if key and request.headers.get("authorization") != f"Bearer {key}":
        STATS["401"] += 1
        return JSONResponse({"error": {"message": "bad key"}}, status_code=401)
    STATS[f"open:{model}"] += 1
    STATS[f"max_open:{model}"] = max(STATS[f"max_open:{model}"], STATS[f"open:{model}"])
    try:
        await asyncio.sleep(_number(words, "slow"))
    finally:
        STATS[f"open:{model}"] -= 1
    prompt = body["messages"][-1]["content"]
    text = reply_to(words, prompt)
    usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
    choice = {"index": 0, "message": {"role": "assistant", "content": text}}
    return JSONResponse({"choices": [{**choice, "finish_reason": "stop"}], "usage": usage})


async def stats(request: Request) -> JSONResponse:
    return JSONResponse(dict(STATS))


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


app = Starlette(
    routes=[
        Route("/v1/chat/completions", complete, methods=["POST"]),
        Route("/stats", stats, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ]
)
