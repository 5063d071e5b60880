"""Ports chosen for a run: free, distinct, and out of the range outgoing connections use."""

from __future__ import annotations

import socket

from agentgym_rl.processes.ports import PortBook, ephemeral_start, free_port, port_is_busy


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    book = PortBook()
    ports = [book.free() for _ in range(20)]
    assert len(set(ports)) == 20
    assert all(10000 <= p < ephemeral_start() for p in ports)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))  # raises if another process holds it


def test_a_listening_port_is_never_chosen() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", free_port()))
        s.listen()
        busy = s.getsockname()[1]
        assert port_is_busy(busy)
        # every other candidate taken: only the OS can pick, and never the listening port
        taken = set(range(10000, ephemeral_start())) - {busy}
        assert free_port(taken, tries=50) not in taken | {busy}
