"""The judges one rollout server (or evaluation) asks, from each env's `reward.judge`.

Contract: `async with judges_for(envs, log_dir) as judges:` yields env -> `GroupJudge` for every
env whose `reward.source` names a judge; envs with the same judge settings share one (one
endpoint, one set of counters). A judge with a `url` is asked there (API key from `key_env`).
One without is a local HF folder: an OpenAI-compatible vLLM server is started for it as a child
of this process (`LocalJudgeServer`: its own process group, its log `judge-<k>.log` in
`log_dir`, stopped by SIGTERM and then SIGKILL to its group at exit, and by the parent-death
signal if this process dies), asked with guided decoding so its replies parse, and restarted
when it dies (`RestartingEndpoint`). Every endpoint is closed at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import sys
from collections.abc import AsyncIterator, Sequence
from functools import partial
from pathlib import Path

from agentgym_rl.config.rollout import EnvSettings, JudgeConfig
from agentgym_rl.judging.client import ChatEndpoint, Completion, JudgeUnavailable
from agentgym_rl.judging.groups import GroupJudge
from agentgym_rl.judging.judge import Endpoint, Judge
from agentgym_rl.processes.child import (
    Child,
    ChildExited,
    ChildSpec,
    NotReady,
    health_ok,
    wait_ready,
)
from agentgym_rl.processes.ports import free_port

log = logging.getLogger(__name__)

READY_S = 600.0
"""How long a local judge server may take to start (a loaded 2-core host: minutes)."""
STOP_GRACE_S = 15.0
EXIT_WAIT_S = 5.0
"""How long a failed request waits for a server that no longer answers its health check to be
seen exited (its sockets close before the kernel reports its exit)."""
SERVED_NAME = "judge"
"""The model name a local judge server answers to."""


class JudgeServerError(RuntimeError):
    """A local judge server exited or did not get ready."""


class LocalJudgeServer:
    """An OpenAI-compatible judge server as a child process (`for_model`: vLLM's, on a local HF
    folder), started, restarted and stopped by its owner."""

    def __init__(self, spec: ChildSpec, log_dir: Path, port: int) -> None:
        self.spec, self.port = spec, port
        self.child = Child(spec, log_dir)
        self.restarts = 0

    @classmethod
    def for_model(cls, config: JudgeConfig, log_dir: Path, name: str) -> LocalJudgeServer:
        from agentgym_rl.inference.kv_cache import kv_cache_bytes

        c, port = config, free_port()
        kv = kv_cache_bytes(
            Path(c.model), sequences=c.max_in_flight, max_model_len=c.max_model_len, dtype=c.dtype
        )
        args = ["--model", c.model, "--served-model-name", SERVED_NAME]
        args += ["--host", "127.0.0.1", "--port", str(port), "--dtype", c.dtype]
        args += ["--max-model-len", str(c.max_model_len), "--max-num-seqs", str(c.max_in_flight)]
        args += ["--kv-cache-memory-bytes", str(kv), "--enforce-eager"]
        argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", *args]
        shell = shlex.join(["python", "-m", "vllm.entrypoints.openai.api_server", *args])
        # the engine's OpenMP threads sleep at a barrier (2 engines share the cores); eager: no
        # compile (`inference/engine.py` sets the same for the policy's engine)
        env = {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
        env["TORCHDYNAMO_DISABLE"] = os.environ.get("TORCHDYNAMO_DISABLE", "1")
        return cls(ChildSpec(name, "judge", argv, shell, health_port=port, env=env), log_dir, port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def running(self) -> bool:
        return self.child.running()

    async def start(self) -> LocalJudgeServer:
        self.child.start()
        try:
            await asyncio.to_thread(wait_ready, self.child, partial(health_ok, self.port), READY_S)
        except (ChildExited, NotReady) as e:
            tail = "\n".join(self.child.tail(15))
            self.stop()
            raise JudgeServerError(
                f"judge server {self.spec.name} did not start ({e}); "
                f"log {self.child.log_path}:\n{tail}"
            ) from None
        return self

    def stop(self) -> None:
        self.child.stop(STOP_GRACE_S)


class RestartingEndpoint:
    """A local judge server's endpoint: a request that fails because the server died restarts it
    (one restart at a time, every waiting request then asks again), so a judge that dies
    mid-run loses nothing but the wait; a server that does not come back fails its groups."""

    def __init__(self, server: LocalJudgeServer, endpoint: ChatEndpoint) -> None:
        self.server, self.endpoint = server, endpoint
        self._restarting = asyncio.Lock()

    async def _restart(self) -> None:
        name, code = self.server.spec.name, self.server.child.poll()
        log.warning("judge server %s died (exit %s); restarting it", name, code)
        self.server.restarts += 1
        try:
            await self.server.start()
        except JudgeServerError as e:
            raise JudgeUnavailable(str(e)) from None

    async def _died(self) -> bool:
        """Whether the server died: False while it answers its health check; otherwise True once
        its exit is seen, within `EXIT_WAIT_S`."""
        if await asyncio.to_thread(health_ok, self.server.port):
            return False
        exited = await asyncio.to_thread(self.server.child.wait, EXIT_WAIT_S)
        return exited is not None or not self.server.running()

    async def complete(
        self, prompt: str, *, max_tokens: int, temperature: float = 0.0, regex: str | None = None
    ) -> Completion:
        ask = partial(
            self.endpoint.complete,
            prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            regex=regex,
        )
        before = self.server.restarts
        try:
            return await ask()
        except JudgeUnavailable:
            async with self._restarting:
                if self.server.restarts == before:  # not restarted meanwhile by another request
                    if not await self._died():
                        raise  # the server is up: not its death
                    await self._restart()
        return await ask()


@contextlib.asynccontextmanager
async def served_judge(
    config: JudgeConfig, log_dir: Path, name: str = "judge-0"
) -> AsyncIterator[Judge]:
    """One judge: its endpoint asked at `config.url`, or a local server started for it (named
    `name`); both closed at exit."""
    server = None
    url, model = config.url, config.model
    if url is None:
        server = await LocalJudgeServer.for_model(config, log_dir, name).start()
        url, model = server.url, SERVED_NAME
    endpoint = ChatEndpoint(
        url,
        model,
        key_env=config.key_env,
        timeout_s=config.timeout_s,
        max_in_flight=config.max_in_flight,
        retries=config.retries,
        backoff_s=config.backoff_s,
    )
    try:
        asked = endpoint if server is None else RestartingEndpoint(server, endpoint)
        yield judge_of(config, asked)
    finally:
        await endpoint.aclose()
        if server is not None:
            await asyncio.to_thread(server.stop)


@contextlib.asynccontextmanager
async def judges_for(
    envs: Sequence[EnvSettings], log_dir: Path
) -> AsyncIterator[dict[str, GroupJudge]]:
    """See the module docstring."""
    shared: dict[str, GroupJudge] = {}
    judges: dict[str, GroupJudge] = {}
    async with contextlib.AsyncExitStack() as stack:
        for e in envs:
            config = e.reward.judge
            if config is None:
                continue
            key = config.model_dump_json()
            if key not in shared:
                name = f"judge-{len(shared)}"
                judge = await stack.enter_async_context(served_judge(config, log_dir, name))
                shared[key] = GroupJudge(judge)
            judges[e.env] = shared[key]
        yield judges


def judge_of(config: JudgeConfig, endpoint: Endpoint) -> Judge:
    return Judge(
        endpoint,
        mode=config.mode,
        rubric=config.rubric,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        guided=config.is_guided,
        message_chars=config.message_chars,
    )
