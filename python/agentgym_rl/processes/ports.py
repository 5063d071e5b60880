"""Ports: the one place a free port is picked (runs, `eval`'s env servers, the agent endpoint,
tests and benches), and the ports of one run, pinned ones checked before anything starts.

Contract: `free_port(host=...)` returns a port free now on `host`, below the OS's ephemeral
range (see why below); `free_ports(n)` n distinct ones. `PortBook.free()` returns a 127.0.0.1 port that is free now, below the OS's ephemeral
range, and never hands the same port out twice; `PortBook.pinned(port, where, fix)` records a port the config fixes and,
when something listens on it already, an error naming the key path and the fix. The check binds
with SO_REUSEADDR, as ZeroMQ and uvicorn do, so sockets in TIME_WAIT from a previous run do not
count as busy.

Why below the ephemeral range: a port is chosen when the run is planned and bound seconds later
by the child that serves on it. A port the OS picked (bind to 0) comes from the range outgoing
connections draw their local ports from, so one of the run's own connections could take it in
between ("Address already in use" at the learner's bind, seen once); ports below that range are
never handed out to outgoing connections.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10000  # leave well-known and common service ports alone


def port_is_busy(port: int, host: str = "127.0.0.1") -> bool:
    """True when binding `host:port` fails (another process listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def ephemeral_start() -> int:
    """The first port of the OS's ephemeral range (Linux's default 32768 where it cannot be read)."""
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(
    taken: set[int] | frozenset[int] = frozenset(),
    tries: int = 200,
    low: int = _LOWEST,
    host: str = "127.0.0.1",
) -> int:
    """A port free now on `host` and not in `taken`: a random one between `low` and the start
    of the ephemeral range, or, when none of `tries` is free, one the OS picks."""
    top = ephemeral_start()
    if top - low >= 1000:
        rng = random.SystemRandom()
        for _ in range(tries):
            port = rng.randrange(low, top)
            if port not in taken and not port_is_busy(port, host):
                return port
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in taken:
            return port


def free_ports(count: int, low: int = _LOWEST) -> list[int]:
    """`count` distinct ports free now (`free_port`; `low` above another service's range, such
    as Ray's worker ports below 20000)."""
    taken: set[int] = set()
    for _ in range(count):
        taken.add(free_port(taken, low=low))
    return sorted(taken)


class PortBook:
    """The ports handed out for one run, and the problems with pinned ones."""

    def __init__(self) -> None:
        self.used: set[int] = set()
        self.errors: list[str] = []

    def free(self) -> int:
        port = free_port(self.used)
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


class JobPorts:
    """The ports of one job on a cluster: consecutive ports of the job's block, the same on every
    node. A port busy on the node that plans the job is skipped (another service, or a process
    that drew it at random, listens there: seen once as a ZeroMQ greeting on an env server's
    port); one busy only on a node this process cannot probe fails its bind, naming the port.
    Same interface as `PortBook`."""

    def __init__(self, base: int, size: int) -> None:
        self.base, self.size = base, size
        self.used: set[int] = set()
        self.errors: list[str] = []
        self._next = base

    @classmethod
    def for_job(cls, job_id: int, port_base: int, ports_per_job: int) -> JobPorts:
        """The block of job `job_id`: blocks follow each other from `port_base` up to the start
        of the ephemeral range, and job ids take them in turn (jobs far apart in id may share a
        block; two at once on one node rarely are)."""
        blocks = max(1, (ephemeral_start() - port_base) // ports_per_job)
        return cls(port_base + (job_id % blocks) * ports_per_job, ports_per_job)

    def free(self) -> int:
        while self._next in self.used or (
            self._next < self.base + self.size and port_is_busy(self._next, "0.0.0.0")
        ):
            self._next += 1
        if self._next >= self.base + self.size:
            self.errors.append(
                f"cluster.ports_per_job: the job needs more than {self.size} ports; raise it"
            )
        self.used.add(self._next)
        return self._next

    def pinned(self, port: int, where: str, fix: str, host: str = "127.0.0.1") -> int:
        if port in self.used:
            self.errors.append(f"{where}: port {port} is used twice in this run; {fix}")
        self.used.add(port)
        return port
