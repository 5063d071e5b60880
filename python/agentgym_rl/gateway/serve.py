"""The endpoint served on the rollout server's own event loop, and the players that use it.

Contract: `GatewayServer.start(gateway, host, port)` serves `gateway` with uvicorn on the running
loop (port 0: a free one) and returns once it listens; `url` is the OpenAI base URL
(`http://host:port/v1`), `close()` stops it. `bearer_token(secret)` is the token agents send:
an HMAC of a fixed label under the run's secret, so the secret itself never reaches user code
(no secret: a random token for this process).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentgym_rl.gateway.app import Gateway
from agentgym_rl.processes.ports import free_port

_LABEL = b"agentgym-rl gateway bearer token v1"


def bearer_token(secret: bytes | str | None) -> str:
    """The endpoint's bearer token for a run's secret (see the module docstring)."""
    if secret is None:
        return secrets.token_hex(16)
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, _LABEL, hashlib.sha256).hexdigest()


@dataclass
class GatewayServer:
    """A running endpoint; see the module docstring."""

    gateway: Gateway
    host: str
    port: int
    task: asyncio.Task[None]
    server: Any

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/v1"

    @classmethod
    async def start(cls, gateway: Gateway, host: str = "127.0.0.1", port: int = 0) -> GatewayServer:
        import uvicorn

        class Quiet(uvicorn.Server):
            # the rollout server's own signal handling owns shutdown (uvicorn's would re-raise
            # the signal once the endpoint stopped)
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield

        port = port or free_port(host=host)
        config = uvicorn.Config(
            gateway,
            host=host,
            port=port,
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_keep_alive=65,  # past the clients' idle expiry (see the env server's)
        )
        server: Any = Quiet(config)
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                task.result()  # the reason it could not start (a port in use)
                raise RuntimeError(f"the endpoint stopped before listening on {host}:{port}")
            await asyncio.sleep(0.02)
        return cls(gateway, host, port, task, server)

    async def close(self) -> None:
        self.server.should_exit = True
        try:
            await asyncio.wait_for(self.task, 10.0)
        except (TimeoutError, asyncio.CancelledError):
            self.task.cancel()
