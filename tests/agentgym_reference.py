"""A stand-in for AgentGym's own env servers (`agentenv-babyai`, `-textcraft`, `-sciworld`, as of
AgentGym commit 3ef9235), for driving our pool against their real endpoint set over real HTTP.

Written here from a reading of those servers; none of their code. What it reproduces is the
wire contract, not the games: the same paths and methods and nothing else (no `/health`), the
same JSON shapes per server, errors as HTTP 200 `{"error": "..."}`, and FastAPI's framing for
what the app itself does not handle (404 `{"detail": "Not Found"}`, 405 `{"detail": "Method Not
Allowed"}`, 422 for a body that does not validate, 500 `Internal Server Error` as text for an
uncaught exception). Each env's game is a one-step toy with the same observation style.

| server | `GET /` | `/create` | `/reset` | `/step` | `GET /observation` | `/close` |
|---|---|---|---|---|---|---|
| babyai | `"This is environment BabyAI."` | `{"id"}` | `{observation, reward, score, deleted, done}` | `{observation, reward, score, done}` | object | `true`/`false` |
| textcraft | `"... TextCraft."` | `{id, observation, done, reward}` | `{id, observation, done, reward}` | `{observation, reward, done}` | string | `true`/`false` |
| sciworld | `"... ScienceWorld."` | `{"id"}` | `{task_name, var_num, task_description, observation, reward, score, deleted, done}` | `{observation, reward, score, done}` | string | `true`, 500 if unknown/closed |

Extra endpoints: BabyAI `POST /render`; TextCraft `GET /commands`, `/goal`, `/detail`; SciWorld
`POST /step_visual`, `GET /action_hint`, `/goals`, `/detail`, `/task_description`,
`/object_tree`, `/state`. Older BabyAI servers had neither `/observation` nor `/close`:
`AGENTGYM_REFERENCE_ROUTES=legacy` serves that set.

Serve with `AGENTGYM_REFERENCE_ENV=babyai python -m uvicorn --app-dir tests
agentgym_reference:app --port PORT` (the env defaults to babyai).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Handler = Callable[[dict[str, Any]], Any]

NAMES = {"babyai": "BabyAI", "textcraft": "TextCraft", "sciworld": "ScienceWorld"}


class Invalid(Exception):
    """A request body or query that FastAPI's validation would reject (HTTP 422)."""


class Crash(Exception):
    """An exception the reference lets escape its handler (HTTP 500)."""


@dataclass
class Episode:
    data_idx: int | None = None
    score: float = 0.0
    done: bool = False
    deleted: bool = False
    observation: str = ""


@dataclass
class Game:
    """The one-step toy behind every flavour: the winning action ends the task with `win`."""

    env: str
    episodes: dict[int, Episode] = field(default_factory=dict)
    next_id: int = 0

    @property
    def goal_action(self) -> str:
        return {
            "babyai": "go to red ball 1",
            "textcraft": "craft 1 oak planks using 1 oak log",
            "sciworld": "focus on water",
        }[self.env]

    @property
    def win(self) -> float:
        return {"babyai": 0.9, "textcraft": 1.0, "sciworld": 100.0}[self.env]

    def first_observation(self, data_idx: int) -> str:
        if self.env == "babyai":
            return f"Your goal: go to the red ball\n{self.view()}"
        if self.env == "textcraft":
            return (
                "Crafting commands:\ncraft 1 oak planks using 1 oak log\n\n"
                f"Goal: craft oak planks. (task {data_idx})"
            )
        return f"This room is called the kitchen. (task {data_idx})"

    def view(self) -> str:
        actions = ", ".join(f'"{a}"' for a in ("turn left", "turn right", self.goal_action))
        return (
            "In front of you in this room, you can see several objects: There is a red ball 1 "
            "2 steps in front of you and 1 steps to your left.  The room has walls around you. "
            f"You are not carrying anything.\nAvailable actions: [{actions}]"
        )

    def play(self, ep: Episode, action: str) -> tuple[str, float, bool]:
        if action.strip().lower() == self.goal_action:
            ep.done = True
            text = {
                "babyai": f"{self.view()}\n The task is completed.",
                "textcraft": "Crafted 1 minecraft:oak_planks",
                "sciworld": "You focus on the water.",
            }[self.env]
            return text, self.win, True
        text = {
            "babyai": f"The action is not recognized. Please check valid actions.\n{self.view()}",
            "textcraft": f"Could not execute {action}",
            "sciworld": "No known action matches that input.",
        }[self.env]
        return text, 0.0, False

    def new(self) -> int:
        idx = self.next_id
        self.next_id += 1
        self.episodes[idx] = Episode()
        return idx

    def check(self, idx: int, *, reset: bool = False) -> Episode:
        ep = self.episodes.get(idx)
        if ep is None:
            raise ValueError(f"The id {idx} is not valid.")
        if ep.deleted:
            raise ValueError(f"The task with environment {idx} has been deleted.")
        if not reset and ep.done and self.env != "textcraft":  # TextCraft does not check
            raise ValueError(f"The task with environment {idx} has finished.")
        return ep


def make_routes(game: Game, legacy: bool) -> dict[tuple[str, str], Handler]:
    """(method, path) -> handler(fields); a handler's `ValueError` becomes `{"error": ...}`."""
    env = game.env

    def create(_: dict[str, Any]) -> Any:
        idx = game.new()
        if env != "textcraft":
            return {"id": idx}
        ep = game.episodes[idx]
        ep.data_idx, ep.observation = idx, game.first_observation(idx)  # resets to task `id`
        return {"id": idx, "observation": ep.observation, "done": False, "reward": 0}

    def reset(f: dict[str, Any]) -> Any:
        idx, data_idx = need_int(f, "id"), need_int(f, "data_idx", default=0)
        ep = game.check(idx, reset=True)
        ep.data_idx, ep.score, ep.done = data_idx, 0.0, False
        ep.observation = game.first_observation(data_idx)
        if env == "textcraft":
            return {"id": idx, "observation": ep.observation, "done": False, "reward": 0}
        out = {"observation": ep.observation, "reward": 0, "score": 0, "deleted": False}
        if env == "sciworld":
            out = {
                "task_name": "boil",
                "var_num": data_idx,
                "task_description": "Your task is to boil water.",
                **out,
            }
        return {**out, "done": False}

    def step(f: dict[str, Any]) -> Any:
        idx, action = need_int(f, "id"), need_str(f, "action")
        ep = game.check(idx)
        if ep.data_idx is None:
            raise ValueError(str(idx))  # BabyAI: KeyError on the missing env, as str()
        ep.observation, reward, done = game.play(ep, action)
        if env == "textcraft":
            return {"observation": ep.observation, "reward": reward, "done": done}
        ep.score += reward
        return {"observation": ep.observation, "reward": reward, "score": ep.score, "done": done}

    def observation(f: dict[str, Any]) -> Any:
        ep = game.check(need_int(f, "id"))
        if env != "babyai":
            return ep.observation
        text = ep.observation if ep.data_idx is not None else "Environment not initialized"
        return {
            "observation": text,
            "reward": 0,
            "score": ep.score,
            "done": ep.done,
            "deleted": ep.deleted,
        }

    def close(f: dict[str, Any]) -> Any:
        idx = need_int(f, "id")
        if env == "sciworld":
            ep = game.episodes.get(idx)
            if ep is None or ep.deleted:
                raise Crash(f"close {idx}")  # uncaught in the reference: HTTP 500
            ep.deleted = True
            return True
        return game.episodes.pop(idx, None) is not None

    def detail(f: dict[str, Any]) -> Any:
        ep = game.check(need_int(f, "id"))
        return {"observation": ep.observation, "done": ep.done, "deleted": ep.deleted}

    def unavailable(_: dict[str, Any]) -> Any:
        raise Crash("not available")  # TextCraft's wrapper lacks these methods: 500

    def nothing(f: dict[str, Any]) -> Any:
        game.check(need_int(f, "id"))
        raise ValueError("not served by this stand-in")

    routes: dict[tuple[str, str], Handler] = {
        ("POST", "/create"): create,
        ("POST", "/reset"): reset,
        ("POST", "/step"): step,
    }
    if env == "babyai":
        if not legacy:
            routes[("GET", "/observation")] = observation
            routes[("POST", "/close")] = close
            routes[("POST", "/render")] = nothing
        return routes
    routes[("GET", "/observation")] = observation
    routes[("POST", "/close")] = close
    routes[("GET", "/detail")] = detail
    if env == "textcraft":
        routes[("GET", "/commands")] = unavailable
        routes[("GET", "/goal")] = unavailable
    else:
        routes[("POST", "/step_visual")] = step
        for path in ("/action_hint", "/goals", "/task_description", "/object_tree", "/state"):
            routes[("GET", path)] = nothing
    return routes


def need_int(fields: dict[str, Any], key: str, default: int | None = None) -> int:
    value = fields.get(key, default)
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)  # query strings, and pydantic's lax mode
    if not isinstance(value, int) or isinstance(value, bool):
        raise Invalid(key)
    return value


def need_str(fields: dict[str, Any], key: str) -> str:
    value = fields.get(key)
    if not isinstance(value, str):
        raise Invalid(key)
    return value


class ReferenceApp:
    """ASGI app serving one flavour; see the module docstring."""

    def __init__(self, env: str = "babyai", *, legacy: bool = False) -> None:
        if env not in NAMES:
            raise ValueError(f"unknown env {env!r}: one of {sorted(NAMES)}")
        self.name = NAMES[env]
        self.routes = make_routes(Game(env), legacy)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        raw = await read_body(receive)
        if (method, path) == ("GET", "/"):
            await respond(send, 200, f"This is environment {self.name}.")
            return
        handler = self.routes.get((method, path))
        if handler is None:
            known = path == "/" or any(p == path for _, p in self.routes)
            detail = "Method Not Allowed" if known else "Not Found"
            await respond(send, 405 if known else 404, {"detail": detail})
            return
        try:
            if method == "GET":
                query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
                fields: Any = {k: v[-1] for k, v in query.items()}
            else:
                fields = json.loads(raw) if raw.strip() else {}
                if not isinstance(fields, dict):
                    raise Invalid("body")
            body = handler(fields)
        except (Invalid, json.JSONDecodeError) as e:
            missing = [{"type": "missing", "loc": ["body", str(e)], "msg": "Field required"}]
            await respond(send, 422, {"detail": missing})
            return
        except ValueError as e:
            body = {"error": str(e)}
        except Crash:
            await respond(send, 500, b"Internal Server Error")
            return
        await respond(send, 200, body)


async def read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            return b"".join(chunks)


async def respond(send: Send, status: int, body: Any) -> None:
    if isinstance(body, bytes):
        payload, ctype = body, b"text/plain; charset=utf-8"
    else:
        payload, ctype = json.dumps(body).encode(), b"application/json"
    headers = [(b"content-type", ctype), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


app = ReferenceApp(
    os.environ.get("AGENTGYM_REFERENCE_ENV", "babyai"),
    legacy=os.environ.get("AGENTGYM_REFERENCE_ROUTES") == "legacy",
)
