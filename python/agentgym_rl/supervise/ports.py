"""Ports of one run: free ones chosen automatically, pinned ones checked before anything starts.

Contract: `PortBook.free()` returns a 127.0.0.1 port the OS just reported free and never hands
the same port out twice; `PortBook.pinned(port, where, fix)` records a port the config fixes and,
when something listens on it already, an error naming the key path and the fix. The check binds
with SO_REUSEADDR, as ZeroMQ and uvicorn do, so sockets in TIME_WAIT from a previous run do not
count as busy.
"""

from __future__ import annotations

import socket


def port_is_busy(port: int, host: str = "127.0.0.1") -> bool:
    """True when binding `host:port` fails (another process listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


class PortBook:
    """The ports handed out for one run, and the problems with pinned ones."""

    def __init__(self) -> None:
        self.used: set[int] = set()
        self.errors: list[str] = []

    def free(self) -> int:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port not in self.used:
                self.used.add(port)
                return port

    def pinned(self, port: int, where: str, fix: str, host: str = "127.0.0.1") -> int:
        """Record `port` set at key path `where`; `fix` says how to choose another."""
        if port in self.used:
            self.errors.append(f"{where}: port {port} is used twice in this run; {fix}")
        elif port_is_busy(port, "0.0.0.0" if host in ("*", "0.0.0.0") else host):
            self.errors.append(
                f"{where}: port {port} is already in use (another run or service listens on it; "
                f"`ss -ltnp 'sport = :{port}'` shows which); stop it, or {fix}"
            )
        self.used.add(port)
        return port
