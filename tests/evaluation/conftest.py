"""Evaluation fixtures: the session's one vLLM engine (shared with tests/rollout and
tests/weights through vllm_fixtures)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import vllm_fixtures


@pytest.fixture(scope="session")
def vllm_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[vllm_fixtures.EngineHandle]:
    handle = vllm_fixtures.acquire(tmp_path_factory)
    yield handle
    vllm_fixtures.release()
