"""Learner test fixtures: the tiny HF models of `learner_fixtures`, for tests that take them as
fixtures (the session's vLLM engine is tests/conftest.py's `vllm_engine`)."""

from __future__ import annotations

from collections.abc import Callable

import learner_fixtures
import pytest
import torch
from transformers import PreTrainedModel


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
