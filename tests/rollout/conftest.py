"""Rollout test fixtures: the session-wide vLLM engine (shared with the other engine test
folders), real env servers per module or per test, and the ChatML fixture tokenizer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness import CHATML, EnvServerProc

import vllm_fixtures
from agentgym_rl.trajectory import ChatTokenizer


@pytest.fixture(scope="session")
def vllm_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[vllm_fixtures.EngineHandle]:
    """The one engine of the session; shut down after the last test that uses it."""
    handle = vllm_fixtures.acquire(tmp_path_factory)
    yield handle
    vllm_fixtures.release()


@pytest.fixture(scope="module")
def babyai_server() -> Iterator[EnvServerProc]:
    server = EnvServerProc("babyai").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def noop_server() -> Iterator[EnvServerProc]:
    server = EnvServerProc("noop").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chat() -> ChatTokenizer:
    return ChatTokenizer.from_dir(CHATML)
