"""Env pool test fixtures: a no-op env server per test (see tests/env_servers.py)."""

from __future__ import annotations

import pytest

from env_servers import EnvServerProc


@pytest.fixture
def noop_server(spawn_server) -> EnvServerProc:
    return spawn_server("noop")
