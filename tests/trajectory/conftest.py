"""Fixtures of the trajectory-builder tests: golden cases and the converted tekken tokenizer."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentgym_rl.trajectory import ChatTokenizer, Trajectory, TrajectoryBuilder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEMPLATES = FIXTURES / "templates"

Replay = Callable[..., Trajectory]


def _load_make_golden() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_golden", FIXTURES / "make_golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def golden_lib() -> ModuleType:
    return _load_make_golden()


def load_golden(name: str) -> tuple[ChatTokenizer, dict[str, Any]]:
    directory = TEMPLATES / name
    golden = json.loads((directory / "golden.json").read_text(encoding="utf-8"))
    pieces = golden["pieces"]
    if pieces is None:
        return ChatTokenizer.from_dir(directory), golden
    template = (directory / pieces["template"]).read_text(encoding="utf-8")
    chat = ChatTokenizer.from_parts(
        directory / pieces["tokenizer"], template, golden["special_tokens"]
    )
    return chat, golden


def replay_case(chat: ChatTokenizer, case: dict[str, Any], **config: Any) -> Trajectory:
    """Prefix = messages before the first assistant turn; then turns and observation runs."""
    messages = case["messages"]
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    builder = TrajectoryBuilder(chat, messages[:first], tools=case.get("tools"), **config)
    engine = iter(case["engine_ids"])
    pending: list[dict[str, Any]] = []
    for turn, msg in enumerate(messages[first:]):
        if msg["role"] != "assistant":
            pending.append(msg)
            continue
        if pending:
            assert builder.add_observation(pending)
            pending = []
        ids = next(engine)
        assert builder.add_generated(ids, [-0.25] * len(ids), turn)
    if pending:
        assert builder.add_observation(pending)
    return builder.finish()


@pytest.fixture(scope="session")
def tekken_dir(golden_lib: ModuleType) -> Path:
    """mistral_common's tekken tokenizer converted by transformers, in the git-ignored cache."""
    pytest.importorskip("mistral_common")
    return Path(golden_lib.convert_tekken())
