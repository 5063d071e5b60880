"""The evaluated policies: the training agent on an `Engine`, and text policies: an
OpenAI-compatible API or any Python function of the messages.

Contract:
- `AgentPolicy` runs the training `AgentLoop` unchanged (token-in/token-out, same prompts, action
  parsing, statuses and turn cap), at the engine's current version; with an `EpisodeLog`, every
  episode is also logged for `agentgym-rl show` and `view`, split `held_out` (group id = the
  task's index in first-seen order).
- `ChatApiPolicy` plays the same episode in text: the messages of `episode/prompts.py`, one
  `POST {base}/chat/completions` per turn, the reply played by `episode/turn.py`'s `act`, the same
  statuses. A reply refused for its context length ends the episode as "truncated"; 429/5xx and
  connection errors are retried `retries` times, then the episode fails; a refused key, unknown
  model or unreachable endpoint (`check()`) raises `EvalError` and stops the evaluation.
- `FunctionPolicy` plays the same text episode with `reply(messages)` (a function or coroutine
  function) writing each assistant turn: baselines, scripted agents, data generation.
- Tool mode (an env whose `EnvSpec.action_format` is TOOLS): `ChatApiPolicy` sends the env's
  tool schemas as `tools` (`tool_choice: "auto"`) and reads the reply's `message.tool_calls`
  (`evaluation/tool_calls.py`), played by `turn.act_on_calls`; the assistant message goes back
  as the API sent it (content plus `tool_calls`), each call answered by a `role: tool` message
  with its `tool_call_id`. A reply without `tool_calls` is an invalid turn, its feedback a user
  message. `FunctionPolicy`'s reply may be such a message (a dict with `tool_calls`) or text,
  whose calls are read in the env reader's family layout (Hermes `<tool_call>` by default).
- Text policies keep each episode's messages on its outcome (`EpisodeOutcome.messages`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx

from agentgym_rl import _core
from agentgym_rl.config import ActionFormat
from agentgym_rl.config.evaluate import EvalError
from agentgym_rl.episode.actions import restore_stop_string, stop_strings
from agentgym_rl.episode.agent import AgentLoop, in_env_episode
from agentgym_rl.episode.context import recent
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.log import EpisodeLog
from agentgym_rl.episode.outcome import reward_of
from agentgym_rl.episode.prompts import episode_prefix
from agentgym_rl.episode.tools import ToolReader, ToolReading, tool_reader
from agentgym_rl.episode.turn import act, act_on_calls
from agentgym_rl.episode.types import EnvSpec, EpisodePlan, TurnBudget
from agentgym_rl.evaluation.runner import EpisodeOutcome
from agentgym_rl.evaluation.tool_calls import (
    as_api_reader,
    assistant_message,
    read_api_calls,
)
from agentgym_rl.judging.groups import transcript_of
from agentgym_rl.judging.rubric import Transcript
from agentgym_rl.wire.types import Status

Message = dict[str, Any]
"""A chat message as the chat-completions API takes it (`content` may be None next to
`tool_calls`)."""


class AgentPolicy:
    """The training agent loop as a `Policy`."""

    def __init__(self, agent: AgentLoop, *, episode_log: EpisodeLog | None = None) -> None:
        self.agent = agent
        self.episode_log = episode_log
        self._groups: dict[str, int] = {}

    async def episode(self, task: Task, *, turn_cap: int, request_id: str) -> EpisodeOutcome:
        plan = EpisodePlan(task, self.agent.engine.version, TurnBudget(0, turn_cap), request_id)
        played = await self.agent.play(plan)
        sample = played.sample
        if self.episode_log is not None:
            group = self._groups.setdefault(task.item_id, len(self._groups))
            self.episode_log.record_held_out(played, plan, group)
        return EpisodeOutcome(
            float(sample.reward),
            sample.status,
            int(sample.turns),
            played.failure,
            runaway_turns=played.runaway,
            transcript=transcript_of(played),
        )

    async def aclose(self) -> None:
        if self.episode_log is not None:
            self.episode_log.close()


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """Where the chat-completions endpoint is and how to sample from it."""

    base_url: str
    """e.g. `http://127.0.0.1:8000/v1` (the path up to `/chat/completions`)."""
    model: str
    api_key: str | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    timeout_s: float = 300.0
    retries: int = 3


_CONTEXT_WORDS = ("context", "maximum", "too long", "max_tokens", "prompt length")


class TextPolicy:
    """A policy that writes each assistant turn from the chat messages so far: the episode is
    played in text, or in tool mode in messages with `tool_calls` (`respond` is what differs)."""

    native_calls = False
    """Tool mode reads only structured `tool_calls` (an API): a reply without them called
    nothing. False: a reply's text is read for calls in its reader's family layout."""

    def __init__(self, pool: _core.EnvPool, envs: Mapping[str, EnvSpec]) -> None:
        self.pool, self.envs = pool, dict(envs)

    async def complete(self, messages: list[Message], stop: Sequence[str] = ()) -> str | None:
        """The assistant's reply, or None when the context is too long to go on."""
        raise NotImplementedError

    async def respond(
        self,
        messages: list[Message],
        stop: Sequence[str] = (),
        tools: list[dict[str, Any]] | None = None,
    ) -> Message | None:
        """The assistant's message (tool mode: offered `tools`, the env's schemas), or None
        when the context is too long to go on. By default `complete`'s text."""
        text = await self.complete(messages, stop)
        return None if text is None else {"role": "assistant", "content": text}

    async def aclose(self) -> None:
        """Nothing to release by default."""

    def tools_of(self, env: str, spec: EnvSpec) -> ToolReader | None:
        """How tool mode reads `env`'s calls (None: not in tool mode)."""
        if spec.action_format is not ActionFormat.TOOLS:
            return None
        reader = spec.tools or tool_reader(env, None)
        return as_api_reader(reader) if self.native_calls else reader

    async def episode(self, task: Task, *, turn_cap: int, request_id: str) -> EpisodeOutcome:
        spec = self.envs.get(task.env, EnvSpec())
        return await in_env_episode(
            self.pool,
            task.env,
            task.data_idx,
            lambda episode, first: self._turns(task, spec, episode, first, turn_cap),
            lambda reason: EpisodeOutcome(0.0, Status.ENV_FAILURE.value, 0, reason),
        )

    def read_calls(
        self, reply: Message, tools: ToolReader, turn: int
    ) -> tuple[ToolReading, Message]:
        """A tool-mode reply's calls, and the assistant message that goes back for it."""
        calls = reply.get("tool_calls")
        if calls:
            reading = read_api_calls(tools, calls, turn)
            return reading, assistant_message(reply, reading)
        text = str(reply.get("content") or "")
        reading = tools.read_calls([], turn) if self.native_calls else tools.read(text, turn)
        return reading, {"role": "assistant", "content": text}

    async def _turns(
        self, task: Task, spec: EnvSpec, episode: int, observation: str, turn_cap: int
    ) -> EpisodeOutcome:
        fmt = spec.action_format
        tools = self.tools_of(task.env, spec)
        schemas = tools.tools.schemas if tools is not None else None
        messages: list[Message] = list(
            episode_prefix(task.env, observation, fmt, spec.system_prompt)
        )
        score, turn = 0.0, 0
        failure: str | None = None
        starts: list[int] = []  # where each turn's reply starts in `messages`
        exchanges: list[tuple[str, str]] = []  # a judge's transcript
        step = partial(self.pool.step, episode)
        while True:
            shown = recent(messages, starts, spec.history_turns)
            reply = await self.respond(shown, stop_strings(fmt), schemas)
            if reply is None:
                status = Status.TRUNCATED
                break
            turn += 1
            starts.append(len(messages))
            if tools is None:
                text = restore_stop_string(str(reply.get("content") or ""), fmt)
                messages.append({"role": "assistant", "content": text})
                acted = await act(step, text, fmt, score)
            else:
                reading, sent = self.read_calls(reply, tools, turn)
                messages.append(sent)
                acted = await act_on_calls(step, reading, score)
            score = acted.score
            said = messages[-1].get("content") or json.dumps(messages[-1].get("tool_calls"))
            exchanges.append((str(said), "\n".join(m["content"] for m in acted.messages)))
            if acted.ended is not None:
                status, failure = acted.ended, acted.failure
                break
            if turn >= turn_cap:
                status = Status.TURN_CAP
                break
            messages.extend(acted.messages)
        reward = reward_of(task.env, score)
        transcript = Transcript(observation, tuple(exchanges))
        return EpisodeOutcome(
            reward, status.value, turn, failure, tuple(messages), transcript=transcript
        )


class FunctionPolicy(TextPolicy):
    """`reply(messages) -> str` (or a coroutine function) as a `Policy`; in tool mode the reply
    may also be an assistant message with `tool_calls` (a dict)."""

    def __init__(
        self,
        pool: _core.EnvPool,
        reply: Callable[[list[Message]], str | Message | Awaitable[str | Message]],
        envs: Mapping[str, EnvSpec],
    ) -> None:
        super().__init__(pool, envs)
        self.reply = reply

    async def _call(self, messages: list[Message]) -> str | Message:
        if inspect.iscoroutinefunction(self.reply):
            out = await self.reply(list(messages))
        else:
            out = await asyncio.to_thread(self.reply, list(messages))
        return out if isinstance(out, dict) else str(out)

    async def complete(self, messages: list[Message], stop: Sequence[str] = ()) -> str | None:
        out = await self._call(messages)
        return str(out.get("content") or "") if isinstance(out, dict) else str(out)

    async def respond(
        self,
        messages: list[Message],
        stop: Sequence[str] = (),
        tools: list[dict[str, Any]] | None = None,
    ) -> Message | None:
        out = await self._call(messages)
        if isinstance(out, dict):
            return {**out, "role": "assistant"}
        return {"role": "assistant", "content": str(out)}


class ChatApiPolicy(TextPolicy):
    """Chat completions over HTTP as a `Policy`; see the module docstring."""

    native_calls = True

    def __init__(
        self,
        pool: _core.EnvPool,
        api: ApiSettings,
        envs: Mapping[str, EnvSpec],
        *,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(pool, envs)
        self.api = api
        headers = {"Authorization": f"Bearer {api.api_key}"} if api.api_key else {}
        self.client = client or httpx.AsyncClient(
            base_url=api.base_url.rstrip("/"), headers=headers, timeout=api.timeout_s
        )

    async def check(self) -> None:
        """Fail fast when the endpoint is unreachable, refuses the key or lacks the model."""
        try:
            r = await self.client.get("/models")
        except httpx.HTTPError as e:
            raise EvalError(
                f"--api-base {self.api.base_url}: unreachable ({e!r}); is the server up and "
                f"the URL the OpenAI base (ending in /v1)?"
            ) from None
        if r.status_code in (401, 403):
            raise EvalError(
                f"--api-base {self.api.base_url}: key refused ({r.status_code}); set the key in "
                f"the variable named by --api-key-env"
            )
        if r.status_code == 200:
            names = [m.get("id") for m in r.json().get("data", [])]
            if names and self.api.model not in names:
                raise EvalError(
                    f"--api-model {self.api.model!r}: not served by {self.api.base_url} "
                    f"(it serves {names})"
                )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def complete(self, messages: list[Message], stop: Sequence[str] = ()) -> str | None:
        """The assistant's reply text, or None when the context is too long for the model."""
        reply = await self.respond(messages, stop)
        return None if reply is None else str(reply.get("content") or "")

    async def respond(
        self,
        messages: list[Message],
        stop: Sequence[str] = (),
        tools: list[dict[str, Any]] | None = None,
    ) -> Message | None:
        """The assistant's message as the API wrote it (with `tools`: offered to the model, its
        calls in `tool_calls`), or None when the context is too long for the model."""
        body: dict[str, Any] = {
            "model": self.api.model,
            "messages": messages,
            "temperature": self.api.temperature,
            "top_p": self.api.top_p,
            "max_tokens": self.api.max_tokens,
            **({"stop": list(stop)} if stop else {}),
            **({"tools": tools, "tool_choice": "auto"} if tools else {}),
        }
        for attempt in range(self.api.retries + 1):
            try:
                r = await self.client.post("/chat/completions", json=body)
            except httpx.TransportError:
                if attempt == self.api.retries:
                    raise
                await asyncio.sleep(0.5 * 2**attempt)  # back off: the server is restarting
                continue
            if r.status_code == 200:
                message = r.json()["choices"][0]["message"]
                return dict(message) if isinstance(message, dict) else {"content": ""}
            if r.status_code == 429 or r.status_code >= 500:
                if attempt == self.api.retries:
                    r.raise_for_status()
                await asyncio.sleep(0.5 * 2**attempt)
                continue
            text = r.text
            if r.status_code == 400 and any(w in text.lower() for w in _CONTEXT_WORDS):
                return None
            note = (
                " (tool mode: the endpoint must accept `tools` and answer with `tool_calls`; "
                "e.g. `vllm serve --enable-auto-tool-choice --tool-call-parser hermes`)"
                if tools and "tool" in text.lower()
                else ""
            )
            raise EvalError(
                f"{self.api.base_url}/chat/completions: {r.status_code} {text[:300]}{note}"
            )
        raise AssertionError("unreachable")
