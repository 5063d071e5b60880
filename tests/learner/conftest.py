"""Learner test fixtures: the session-wide vLLM engine (shared with the other engine folders)
and the tiny HF models of `learner_fixtures`, for tests that take them as fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import learner_fixtures
import pytest
import torch
from transformers import PreTrainedModel

import vllm_fixtures


@pytest.fixture(scope="session")
def vllm_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[vllm_fixtures.EngineHandle]:
    """The one engine of the session; shut down after the last test that uses it."""
    handle = vllm_fixtures.acquire(tmp_path_factory)
    yield handle
    vllm_fixtures.release()


@pytest.fixture(params=learner_fixtures.FAMILIES)
def hf_family(request: pytest.FixtureRequest) -> str:
    """Each model family: "qwen2" (tied embeddings, qkv bias) and "llama" (untied, no bias)."""
    return str(request.param)


@pytest.fixture
def tiny_hf() -> Callable[..., PreTrainedModel]:
    """`tiny_hf(family, **shape)`: a seeded random tiny HF model (`tiny_hf_model`)."""
    return learner_fixtures.tiny_hf_model


@pytest.fixture
def saved_hf_weights() -> Callable[[torch.nn.Module], dict[str, torch.Tensor]]:
    """`saved_hf_weights(hf)`: the state dict as HF saves it (a tied model has no lm_head)."""
    return learner_fixtures.saved_hf_weights
