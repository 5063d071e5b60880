"""The tree a maintainer carries: no run output is tracked (checkpoints, weights, event files,
episode logs, run folders), no tracked file is over 1 MB but the envs' shipped data, and every
relative link of every tracked Markdown page resolves."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 1_000_000
ALLOWED_LARGE = {
    # SearchQA's generated knowledge base and questions: the env's shipped data
    "envs/agentgym_envs/searchqa/data/corpus.jsonl",
    "envs/agentgym_envs/searchqa/data/questions.jsonl",
}
RUN_OUTPUT = (
    re.compile(r"(^|/)runs/"),
    re.compile(r"(^|/)checkpoints?/"),
    re.compile(r"\.(distcp|safetensors|pt|bin)$"),
    re.compile(r"(^|/)events\.out\.tfevents\."),
    re.compile(r"(^|/)episodes\.jsonl$"),
)


def tracked() -> list[str]:
    """The paths of git's index (read directly: the unit tier starts no process)."""
    index = ROOT / ".git" / "index"
    if not index.is_file():
        pytest.skip("not a git checkout")
    data = index.read_bytes()
    signature, version, count = struct.unpack(">4sII", data[:12])
    if signature != b"DIRC" or version not in (2, 3):
        pytest.skip(f"git index version {version}: not read here")
    paths, at = [], 12
    for _ in range(count):
        flags = struct.unpack(">H", data[at + 60 : at + 62])[0]
        start = at + 62 + (2 if version == 3 and flags & 0x4000 else 0)
        end = data.index(b"\0", start)
        paths.append(data[start:end].decode())
        at += (end - at + 8) // 8 * 8  # entries are NUL-padded to a multiple of 8 bytes
    return [p for p in paths if (ROOT / p).is_file()]


def run_output(paths: Iterable[str]) -> list[str]:
    """The paths that look like a run's output (see `RUN_OUTPUT`)."""
    return [p for p in paths if any(rule.search(p) for rule in RUN_OUTPUT)]


def test_no_run_output_is_tracked() -> None:
    assert run_output(tracked()) == []


def test_a_planted_checkpoint_is_caught() -> None:
    planted = [
        "examples/runs/guess/checkpoints/step_40/__0_0.distcp",
        "docs/results/x/model.safetensors",
        "docs/results/x/tensorboard/events.out.tfevents.1.host",
        "docs/results/x/rollout-0/episodes.jsonl",
        "envs/agentgym_envs/babyai/data/goto_test.json",
    ]
    assert run_output(planted) == planted[:4]


def test_no_large_file_but_shipped_env_data() -> None:
    large = {p for p in tracked() if (ROOT / p).stat().st_size > MAX_BYTES}
    assert large <= ALLOWED_LARGE, sorted(large - ALLOWED_LARGE)


def _links(page: Path) -> Iterable[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if "://" not in target and not target.startswith(("#", "mailto:")):
            yield target.split("#", 1)[0]


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in (p for p in tracked() if p.endswith(".md")):
        for target in _links(ROOT / page):
            if not (ROOT / PurePosixPath(page).parent / target).exists():
                broken.append(f"{page}: {target}")
    assert broken == []
