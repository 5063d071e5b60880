"""The sites' server: the shop and the forum on 127.0.0.1, served by uvicorn on a thread of
their own with its own event loop, so the env's worker thread (which drives the browser) and
the server's event loop never block each other.

Contract: `Sites.start(seed, shop_port, forum_port)` binds both sockets before returning
(port 0 = a free port; a connection made right after start queues in the backlog until the
loop accepts it), so `urls` is valid at once; `close()` stops both servers and joins the
thread. `urls` maps WebArena's placeholders (`__SHOPPING__`, `__REDDIT__`) to base URLs.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator

import uvicorn

from agentgym_envs.web.sites.data import SEED, generate
from agentgym_envs.web.sites.forum import ForumApp
from agentgym_envs.web.sites.shop import ShopApp

HOST = "127.0.0.1"


class _Server(uvicorn.Server):
    """uvicorn without signal handling (it runs off the main thread, inside another process)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    sock.listen(256)
    sock.set_inheritable(True)
    return sock


class Sites:
    """The running shop and forum."""

    def __init__(self, shop: ShopApp, forum: ForumApp, socks: list[socket.socket]) -> None:
        self.shop = shop
        self.forum = forum
        self._socks = socks
        ports = [s.getsockname()[1] for s in socks]
        self.urls = {
            "__SHOPPING__": f"http://{HOST}:{ports[0]}",
            "__REDDIT__": f"http://{HOST}:{ports[1]}",
        }
        self._servers = [
            _Server(
                uvicorn.Config(
                    app, lifespan="off", access_log=False, log_level="warning", timeout_keep_alive=5
                )
            )
            for app in (shop, forum)
        ]
        self._thread = threading.Thread(target=self._run, name="web-sites", daemon=True)

    @classmethod
    def start(
        cls,
        seed: int = SEED,
        shop_port: int = 0,
        forum_port: int = 0,
        max_sessions: int = 2048,
        idle_s: float = 1800.0,
    ) -> Sites:
        shop_data, forum_data = generate(seed)
        socks = [_bind(shop_port)]
        try:
            socks.append(_bind(forum_port))
        except OSError:
            socks[0].close()
            raise
        sites = cls(
            ShopApp(shop_data, max_sessions, idle_s),
            ForumApp(forum_data, max_sessions, idle_s),
            socks,
        )
        sites._thread.start()
        return sites

    def _run(self) -> None:
        async def main() -> None:
            await asyncio.gather(
                *(
                    s.serve(sockets=[sock])
                    for s, sock in zip(self._servers, self._socks, strict=True)
                )
            )

        asyncio.run(main())

    def reset(self, session: str) -> None:
        """Forget the session's state on both sites (it starts again from the base)."""
        self.shop.store.reset(session)
        self.forum.store.reset(session)

    def close(self) -> None:
        for server in self._servers:
            server.should_exit = True
        self._thread.join(timeout=10)
        for sock in self._socks:
            sock.close()
