"""The Python examples of the README, docs/api.md and docs/envs.md: every block compiles, every public name
they use exists, and the config example runs as written (the training, evaluation and rollout
examples run with the tiny config in test_api.py, through the same calls)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

import agentgym_rl

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "docs" / "api.md", ROOT / "docs" / "envs.md"]


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def test_every_example_compiles_and_names_public_api() -> None:
    blocks = [b for page in PAGES for b in python_blocks(page)]
    assert len(blocks) >= 5
    used: set[str] = set()
    for block in blocks:
        # a top-level `await` is how the docs show the coroutine forms
        tree = ast.parse(block.replace("await ", ""))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "agentgym_rl"
            ):
                used.add(node.attr)
    assert used and used <= set(agentgym_rl.__all__), used - set(agentgym_rl.__all__)


def test_the_config_example_runs_as_written(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)  # its paths are the repository's, as the page says
    [block] = [b for b in python_blocks(ROOT / "docs" / "api.md") if "from_yaml" in b][:1]
    exec(compile(block, "docs/api.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "6 5 0.8" in printed  # groups per step, the overridden max_steps and temperature
    assert "rollout.engine.temprature: Extra inputs are not permitted" in printed


def test_the_custom_env_shown_is_the_example_file_and_a_valid_env() -> None:
    """docs/envs.md shows examples/guess_env.py whole; the catalog accepts it as an env."""
    from agentgym_envs import env_class

    source = (ROOT / "examples" / "guess_env.py").read_text().rstrip()
    assert any(block.rstrip() == source for block in python_blocks(ROOT / "docs" / "envs.md"))
    assert len(source.splitlines()) <= 40
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        cls = env_class("guess_env:GuessEnvironment")
    finally:
        sys.path.remove(str(ROOT / "examples"))
    assert cls.name == "guess" and cls.split_names() == ["train", "test"]
    episode = cls().new_episode()
    episode.reset(5)
    outcomes = [episode.step(str(n)) for n in range(1, 11)]
    assert sum(o.done for o in outcomes) == 1 and next(o for o in outcomes if o.done).score == 1.0
