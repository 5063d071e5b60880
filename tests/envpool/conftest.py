"""Env pool test fixtures: a no-op env server per test (`processes.env_servers.EnvServerProcess`)."""

from __future__ import annotations

import pytest

from agentgym_rl.processes.env_servers import EnvServerProcess


@pytest.fixture
def noop_server(spawn_server) -> EnvServerProcess:
    return spawn_server("noop")
