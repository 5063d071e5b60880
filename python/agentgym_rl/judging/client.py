"""An OpenAI-compatible chat endpoint, asked by a judge.

Contract: `ChatEndpoint(url, model, key_env=...)` posts to `<url>/chat/completions` (`url` is a
base such as `http://host:8000/v1`, or the full completions URL), with the API key read from the
environment variable `key_env` names (never the key itself) as a bearer token. At most
`max_in_flight` requests are open at once (the rest wait); a request that fails in a way that may
pass (no connection, a timeout, HTTP 429 or 5xx) is retried `retries` times with exponential
backoff from `backoff_s`, then raises `JudgeUnavailable`; any other HTTP error raises it at once
(a wrong model name or key does not get better by asking again). With `regex`, the request asks
the server to constrain the reply to it (vLLM's `structured_outputs`; an endpoint that does not
know the field may refuse it, so judges of other servers leave it off).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

import httpx

RETRIED_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class JudgeUnavailable(RuntimeError):
    """The judge's endpoint did not answer (after its retries), or refused the request."""


@dataclass(frozen=True, slots=True)
class Completion:
    """A judge's reply and what it cost."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    """Requests made for it (1: no retry)."""


class ChatEndpoint:
    """See the module docstring."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        key_env: str | None = None,
        timeout_s: float = 60.0,
        max_in_flight: int = 8,
        retries: int = 3,
        backoff_s: float = 1.0,
    ) -> None:
        url = url.rstrip("/")
        self.url = url if url.endswith("/chat/completions") else f"{url}/chat/completions"
        self.model = model
        self.key_env = key_env
        self.retries, self.backoff_s = retries, backoff_s
        self._slots = asyncio.Semaphore(max_in_flight)
        self._client = httpx.AsyncClient(timeout=timeout_s)

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.key_env, "") if self.key_env else ""
        return {"authorization": f"Bearer {key}"} if key else {}

    async def complete(
        self, prompt: str, *, max_tokens: int, temperature: float = 0.0, regex: str | None = None
    ) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if regex is not None:
            body["structured_outputs"] = {"regex": regex}
        async with self._slots:
            return await self._post(body)

    async def _post(self, body: dict[str, Any]) -> Completion:
        why = ""
        for attempt in range(1, self.retries + 2):
            if attempt > 1:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 2))
            try:
                reply = await self._client.post(self.url, json=body, headers=self._headers())
            except httpx.HTTPError as e:
                why = f"{type(e).__name__}: {e}"
                continue
            if reply.status_code in RETRIED_STATUS:
                why = f"HTTP {reply.status_code}: {reply.text[:200]}"
                continue
            if reply.status_code != 200:
                raise JudgeUnavailable(
                    f"judge at {self.url} refused the request: HTTP {reply.status_code}: "
                    f"{reply.text[:300]}"
                )
            return _completion(reply, attempt, self.url)
        raise JudgeUnavailable(f"judge at {self.url} failed {self.retries + 1} times: {why}")

    async def aclose(self) -> None:
        await self._client.aclose()


def _completion(reply: httpx.Response, attempts: int, url: str) -> Completion:
    try:
        data = reply.json()
        text = data["choices"][0]["message"]["content"] or ""
        usage = data.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise JudgeUnavailable(f"judge at {url} answered no chat completion: {e!r}") from None
    return Completion(
        str(text),
        int(usage.get("prompt_tokens", 0) or 0),
        int(usage.get("completion_tokens", 0) or 0),
        attempts,
    )
