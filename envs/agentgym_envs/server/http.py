"""The AgentGym HTTP protocol as an ASGI app on Starlette (served by uvicorn).

Same endpoints, field names and behaviour as the AgentGym servers, so their clients work
unchanged: request bodies are JSON objects, every refused request is HTTP 200 with
`{"error": "..."}`. Only routing failures use 404/405. Three variants, chosen by the env's
`http_dialect`: "agentgym" (BabyAI, TextCraft: `id`/`data_idx`, object replies), "sciworld"
(the same, plus AgentGym's SciWorld `/reset` fields) and "searchqa" (AgentGym's SearchQA
server: `env_idx`, `/create {"id": item}` answered by a bare int, `/reset` by the bare prompt,
`/close` by true/false) and "webarena" (AgentGym's WebArena server, for `webarena` and
`miniwob`: `env_idx`, `/create` answered by `{"env_idx"}`, `/reset {"env_idx", "seed", "idx"}`,
`/step` answered with `terminated`/`truncated` and the reward paid when the episode ends); all
translate to the same table ops, and all keep `/health`, `/info`, `/tools` and `GET /`. See PROTOCOL.md for
the schemas.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentgym_envs.server.asgi import Receive, Scope, Send, starlette_app
from agentgym_envs.server.base import EnvError, ErrorCode
from agentgym_envs.server.latency import StepLatency
from agentgym_envs.server.table import EpisodeTable, dispatch, int_field, str_field

MAX_BODY_BYTES = 1 << 20

# path -> (method, op)
ROUTES: dict[str, tuple[str, str]] = {
    "/create": ("POST", "create"),
    "/reset": ("POST", "reset"),
    "/step": ("POST", "step"),
    "/close": ("POST", "close"),
    "/observation": ("GET", "observation"),
    "/available_actions": ("GET", "available_actions"),
    "/health": ("GET", "health"),
    "/info": ("GET", "info"),
    "/tools": ("GET", "tools"),
}


class HttpApp:
    """ASGI callable serving one `EpisodeTable`."""

    def __init__(self, table: EpisodeTable, latency: StepLatency | None = None) -> None:
        self.table = table
        self.latency = latency
        dialect = getattr(table.env, "http_dialect", "agentgym")
        if dialect not in DIALECTS:
            raise ValueError(f"env {table.env.name!r} has unknown http_dialect {dialect!r}")
        self.dispatch = DIALECTS[dialect]
        routes = [Route("/", self._hello)]  # any method, as AgentGym's servers answer it
        routes += [Route(path, self._op(op), methods=[m]) for path, (m, op) in ROUTES.items()]
        self.app = starlette_app(routes, {HTTPException: _routing_error})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan is turned off by the server
            return
        await self.app(scope, receive, send)

    async def _hello(self, request: Request) -> Response:
        return JSONResponse(f"This is environment {self.table.env.name}.")

    def _op(self, op: str) -> Callable[[Request], Awaitable[Response]]:
        async def answer(request: Request) -> Response:
            try:
                if request.method in ("GET", "HEAD"):
                    fields = _query_fields(request)
                else:
                    fields = _json_fields(await _read_body(request), allow_empty=op == "create")
                if op == "health":  # answered at once, also while a blocking env call runs
                    body: Any = self.dispatch(self.table, op, fields)
                else:
                    body = await self.table.run(self.dispatch, self.table, op, fields)
            except EnvError as err:
                body = {"error": err.message}
            if self.latency is not None and op == "step":
                await self.latency.wait()
            return _json(body)

        return answer


async def _routing_error(request: Request, exc: Exception) -> Response:
    """A path no route has (404), or the wrong method for one (405), as `{"error"}`."""
    assert isinstance(exc, HTTPException)
    path = request.url.path
    if exc.status_code == 405 and path in ROUTES:
        method = ROUTES[path][0]
        return _json({"error": f"{path} takes {method}, not {request.method}"}, 405)
    return _json({"error": f"no such endpoint: {path}"}, 404)


def searchqa_dispatch(table: EpisodeTable, op: str, fields: dict[str, Any]) -> Any:
    """AgentGym's SearchQA server's requests and reply shapes, on the same table ops."""
    if op == "create":  # the reference loads item `id` at once: /observation works after it
        item = int_field(fields, "id") if "id" in fields else 0
        table.env.check_data_idx(item)
        eid = int(table.create()["id"])
        try:
            table.reset(eid, item)
        except EnvError:
            table.close(eid)
            raise
        return eid
    if op in ("health", "info", "tools"):
        return dispatch(table, op, fields)
    eid = int_field(fields, "env_idx")
    if op == "reset":
        return table.reset(eid, int_field(fields, "id"))["observation"]
    if op == "step":
        return {**table.step(eid, str_field(fields, "action")), "info": None}
    if op == "close":  # the reference answers false for an id it does not know
        try:
            return table.close(eid)["closed"]
        except EnvError as err:
            if err.code is ErrorCode.UNKNOWN_EPISODE:
                return False
            raise
    return dispatch(table, op, {"id": eid})


def sciworld_dispatch(table: EpisodeTable, op: str, fields: dict[str, Any]) -> Any:
    """AgentGym's SciWorld server: the common protocol, but `/reset` also names the task
    (`task_name`, `var_num`, `task_description`, `deleted`) and its `observation` is the
    look-around text alone, which that server's client puts after the task description."""
    result = dispatch(table, op, fields)
    if op != "reset":
        return result
    return {**result, **table.episode(int_field(fields, "id")).reference_reset_fields()}  # type: ignore[attr-defined]


def webarena_dispatch(table: EpisodeTable, op: str, fields: dict[str, Any]) -> Any:
    """AgentGym's WebArena server: ids travel as `env_idx`; `/reset` names the task `idx` (and a
    `seed`, unused) and answers `{"observation"}` alone; `/step` takes the model's whole reply
    (the env reads the fenced command in it) and answers `{observation, reward, terminated,
    truncated, info}`, where `reward` is 0 until the step that ends the episode, which pays the
    final score (that server's evaluator runs only then); `score` and `invalid` ride along.
    `GET /observation` answers the text."""
    if op == "create":
        return {"env_idx": int(table.create()["id"])}
    if op in ("health", "info", "tools"):
        return dispatch(table, op, fields)
    eid = int_field(fields, "env_idx")
    if op == "reset":
        return {"observation": table.reset(eid, int_field(fields, "idx"))["observation"]}
    if op == "step":
        out = table.step(eid, str_field(fields, "action"))
        done = bool(out["done"])
        return {
            "observation": out["observation"],
            "reward": out["score"] if done else 0.0,
            "terminated": done,
            "truncated": False,
            "info": None,
            "score": out["score"],
            "invalid": out["invalid"],
        }
    return dispatch(table, op, {"id": eid})


DIALECTS: dict[str, Callable[[EpisodeTable, str, dict[str, Any]], Any]] = {
    "agentgym": dispatch,
    "searchqa": searchqa_dispatch,
    "sciworld": sciworld_dispatch,
    "webarena": webarena_dispatch,
}


async def _read_body(request: Request) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise EnvError(ErrorCode.BAD_REQUEST, f"request body over {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _json_fields(raw: bytes, *, allow_empty: bool) -> dict[str, Any]:
    if not raw.strip():
        if allow_empty:
            return {}
        raise EnvError(ErrorCode.BAD_REQUEST, "empty request body: expected a JSON object")
    try:
        fields = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise EnvError(ErrorCode.BAD_REQUEST, f"malformed JSON: {exc}") from exc
    if not isinstance(fields, dict):
        raise EnvError(ErrorCode.BAD_REQUEST, "request body must be a JSON object")
    return fields


def _query_fields(request: Request) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, value in request.query_params.items():  # the last value of a repeated key
        try:
            fields[key] = int(value)
        except ValueError:
            fields[key] = value  # left as a string: the validator reports the wrong type
    return fields


def _json(body: Any, status: int = 200) -> Response:
    """`body` as JSON (NaN and infinities as Python writes them: a reward may be one)."""
    payload = json.dumps(body, ensure_ascii=False).encode()
    return Response(payload, status_code=status, media_type="application/json")
