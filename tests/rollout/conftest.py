"""Rollout test fixtures: the session-wide vLLM engine (shared with the other engine test
folders); env servers and the ChatML fixture tokenizer come from tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import vllm_fixtures


@pytest.fixture(scope="session")
def vllm_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[vllm_fixtures.EngineHandle]:
    """The one engine of the session; shut down after the last test that uses it."""
    handle = vllm_fixtures.acquire(tmp_path_factory)
    yield handle
    vllm_fixtures.release()
