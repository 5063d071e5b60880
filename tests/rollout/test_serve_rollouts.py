"""`agentgym-rl serve-rollouts`: argument parsing, help text, config errors before any engine."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentgym_rl.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "rollout" / "babyai_tiny.yaml"


def test_parses_config_sync_and_overrides() -> None:
    args = build_parser().parse_args(
        ["serve-rollouts", "--config", str(TINY), "--sync", "buffer.max_staleness=4", "a.b=[1]"]
    )
    assert args.config == str(TINY) and args.sync
    assert args.overrides == ["buffer.max_staleness=4", "a.b=[1]"]


def test_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve-rollouts", "--help"])
    out = capsys.readouterr().out
    for option in ("--config FILE", "--sync", "KEY=VALUE", "SIGTERM"):
        assert option in out


@pytest.mark.process  # the command runs owned: its watchdog is a process
def test_bad_config_exits_2_with_the_key_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve-rollouts", "--config", str(TINY), "buffer.max_ready=0"]) == 2
    assert "buffer.max_ready" in capsys.readouterr().err


@pytest.mark.process
def test_parsing_imports_nothing_heavy() -> None:
    code = (
        "import sys; from agentgym_rl.cli import build_parser; "
        "argv = ['serve-rollouts', '--sync']; build_parser(argv).parse_args(argv); "
        "heavy = {'pydantic', 'torch', 'vllm', 'uvloop', 'agentgym_rl.rollout.dispatcher'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_missing_model_is_one_clear_message(tmp_path: Path) -> None:
    from agentgym_rl.config.startup import missing_model

    assert "not found" in (missing_model(tmp_path / "nope") or "")
    (tmp_path / "config.json").write_text("{}")
    assert "tokenizer.json" in (missing_model(tmp_path) or "")
    (tmp_path / "tokenizer.json").write_text("{}")
    assert missing_model(tmp_path) is None


@pytest.mark.process
def test_context_longer_than_the_model_is_one_line_before_any_engine(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"max_position_embeddings": 2048}')
    (tmp_path / "tokenizer.json").write_text("{}")
    cmd = [sys.executable, "-m", "agentgym_rl.cli", "serve-rollouts", "--config", str(TINY)]
    cmd += [f"model={tmp_path}", "engine.max_model_len=4096"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr.splitlines() == [
        "serve-rollouts: engine.max_model_len (4096) is larger than the model's context of 2048 "
        f"tokens (max_position_embeddings in {tmp_path / 'config.json'}); give "
        "engine.max_model_len <= 2048"
    ]


def test_shipped_tiny_config_fits_the_tiny_model(tmp_path: Path) -> None:
    from agentgym_rl.config import load_rollout_config
    from agentgym_rl.config.startup import context_misfit

    (tmp_path / "config.json").write_text('{"max_position_embeddings": 2048}')  # create_tiny_model
    assert context_misfit(tmp_path, load_rollout_config(TINY, []).engine.max_model_len, "x") is None


@pytest.mark.process
def test_turn_longer_than_the_models_own_context_is_one_line(tmp_path: Path) -> None:
    """With `engine.max_model_len` unset (the model's own length) the turn length is checked
    against the model before any engine starts."""
    (tmp_path / "config.json").write_text('{"max_position_embeddings": 128}')
    (tmp_path / "tokenizer.json").write_text("{}")
    cmd = [sys.executable, "-m", "agentgym_rl.cli", "serve-rollouts", "--config", str(TINY)]
    cmd += [f"model={tmp_path}", "engine.max_model_len=null"]  # 200 tokens per turn
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr.splitlines() == [
        "serve-rollouts: engine.max_tokens_per_turn (200) must be below the context length "
        "(128, engine.max_model_len)"
    ]


def test_serve_hands_run_service_the_engines_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve` starts the engine with the config's settings (`EngineOptions.from_config`) and
    gives `run_service` the context length the engine runs (the model's own when unset)."""
    import asyncio

    from agentgym_rl.config import load_rollout_config
    from agentgym_rl.inference import engine as engine_mod
    from agentgym_rl.rollout import service

    started: list[engine_mod.EngineOptions] = []
    served: list[int | None] = []

    class Engine:
        max_model_len = 2048
        shut_down = False

        def shutdown(self) -> None:
            self.shut_down = True

    engine = Engine()

    async def start(model_dir: object, options: engine_mod.EngineOptions) -> Engine:
        started.append(options)
        return engine

    async def run_service(config: object, engine: object, *, sync: bool, judges: object) -> str:
        served.append(config.engine.max_model_len)  # type: ignore[attr-defined]
        return "summary"

    monkeypatch.setattr(engine_mod.VllmEngine, "start", start)
    monkeypatch.setattr(service, "run_service", run_service)
    config = load_rollout_config(TINY, [f"model={tmp_path}", "engine.max_model_len=null"])
    assert asyncio.run(service.serve(config)) == "summary"
    assert served == [2048] and engine.shut_down
    [options] = started
    assert options.max_model_len is None and options.dtype == config.engine.dtype == "float32"


def _group(pgid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True)
    return [int(pid) for pid in out.stdout.split()]


@pytest.mark.process
@pytest.mark.slow
def test_sigterm_while_vllm_starts_stops_its_engine_processes_too(tmp_path: Path) -> None:
    """The default SIGTERM action would kill the command alone, leaving vLLM's engine core and
    worker running with nobody to stop them. Before the signal, the engine has taken the KV
    cache sized for the episodes in flight (`inference/kv_cache.py`): 64 groups of 4 at 2,048
    tokens of 1 KiB (the tiny model: 2 layers, 1 KV head of 64, fp32), 512 MiB, twice the
    floor an unsized engine would get."""
    from agentgym_rl.inference.kv_cache import bytes_per_token
    from agentgym_rl.policy_creation import create_tiny_model
    from vllm_fixtures import tiny_corpus

    model = create_tiny_model(tmp_path / "model", corpus=tiny_corpus(), vocab_size=320, seed=0)
    assert bytes_per_token(model, "float32") == 1024
    log = tmp_path / "serve.log"
    argv = [
        "serve-rollouts",
        "--config",
        str(TINY),
        f"model={model}",
        f"log_dir={tmp_path}",
        "buffer.max_in_flight=64",
    ]
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentgym_rl.cli", *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline, kv = time.monotonic() + 240, None
        while kv is None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            kv = re.search(r"KV cache size: ([\d,]+) tokens", log.read_text(errors="replace"))
        assert kv is not None, log.read_text(errors="replace")[-2000:]
        assert int(kv.group(1).replace(",", "")) == 64 * 4 * 2048  # 512 MiB of 1 KiB tokens
        assert "engine KV cache: 512 MiB for 256 episodes at once" in log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 30
        while _group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _group(proc.pid) == [], f"left running: {_group(proc.pid)}"
    finally:
        for pid in _group(proc.pid):
            os.kill(pid, signal.SIGKILL)
