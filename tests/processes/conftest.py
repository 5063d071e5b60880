"""Fixtures of the stopped-command matrix (tests/processes/test_stopped_*.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny model (made here, once): every turn runs to its token cap, so a command
    is still at work when the signal comes (the case issue 74 met)."""
    from agentgym_rl.policy_creation import create_tiny_model
    from vllm_fixtures import tiny_corpus

    out = tmp_path_factory.mktemp("tiny")
    create_tiny_model(out, corpus=tiny_corpus(), vocab_size=320, seed=0)
    return out
