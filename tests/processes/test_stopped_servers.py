"""The stopped-command matrix for the serving commands: `serve-rollouts` (vLLM's engine core),
`env serve` with children of its own (ScienceWorld's JVMs, the web envs' Chromium) and `view`
(in-process: its port). Each is stopped by SIGINT, SIGTERM or SIGKILL while its children start
and while it works; no process of its tree is left, its port is free again, its temporary
folder is empty. Real processes throughout.

CI runs each command stopped by SIGTERM while it works; the whole matrix, with
test_stopped_commands.py and test_stopped_api.py, is `pytest tests/processes/test_stopped_*.py`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from stopping import (
    SIGNALS,
    Watched,
    by_signal,
    engine_core_started,
    exit_code,
    port_bound,
    start,
    start_cli,
)

from agentgym_rl.config.rollout import http_dialect
from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.processes.ports import free_port
from agentgym_rl.rollout.sync_loop import HttpEnvClient

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]


def _matrix(phases: tuple[str, ...]) -> list[object]:
    """Every (phase, signal); CI's slice is SIGTERM while it works."""
    return [
        pytest.param(p, s, marks=[] if (p, s) == ("working", "SIGTERM") else [pytest.mark.extended])
        for p in phases
        for s in SIGNALS
    ]


def _ended_as_stopped(w: Watched, sig: str, *, drained: bool = False) -> None:
    """SIGINT/SIGTERM: the exit code of the signal (or 0 where the command drains its work)."""
    if sig != "SIGKILL":
        expected = {exit_code(sig), 0} if drained else {exit_code(sig)}
        assert w.proc.returncode in expected, w.output()


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1.0) as r:
            return bool(json.loads(r.read()))
    except OSError:
        return False


# --- env serve: an env whose server starts processes of its own --------------------------------
CHILD_OF = {"sciworld": ("java", "java"), "webarena": ("chromium", "chrom")}
"""env -> (the program it needs, a word of its children's command lines)."""


@pytest.mark.parametrize("env", ["sciworld", "webarena"])
@pytest.mark.parametrize(("phase", "sig"), _matrix(("starting", "working")))
def test_env_serve_stopped_leaves_no_jvm_or_browser(
    env: str, phase: str, sig: str, tmp_path: Path
) -> None:
    needs, word = CHILD_OF[env]
    if shutil.which(needs) is None and not (env == "webarena" and _playwright_chromium()):
        pytest.skip(f"{needs} is not installed")
    port, zmq_port = free_port(), free_port()
    w = start_cli(["env", "serve", env, "--port", str(port), "--zmq-port", str(zmq_port)], tmp_path)
    try:
        w.wait_for("/health", lambda: _healthy(port), timeout_s=120)
        client = HttpEnvClient(f"http://127.0.0.1:{port}", http_dialect(env))
        if phase == "starting":  # its JVM or browser starting for a first episode
            threading.Thread(target=_reset_quietly, args=(client,), daemon=True).start()
            w.wait_for(f"a {needs} process", lambda: any(word in c for c in w.cmdlines()))
        else:  # an episode open: its JVM or browser page live
            assert client.reset(0)
            w.look()
            assert any(word in line for line in w.cmdlines()), w.cmdlines()
        w.stop(sig)
        _ended_as_stopped(w, sig, drained=True)
        assert not port_bound(port) and not port_bound(zmq_port)
        w.assert_no_temporary_files()
    finally:
        w.clean_up()


def _reset_quietly(client: HttpEnvClient) -> None:
    with contextlib.suppress(Exception):  # the server is stopped under it
        client.reset(0)


def _playwright_chromium() -> bool:
    """Playwright's own Chromium (the web envs' browser when no system one is installed)."""
    return any((Path.home() / ".cache" / "ms-playwright").glob("chromium*"))


# --- serve-rollouts: vLLM's engine core --------------------------------------------------------
@pytest.fixture(scope="module")
def babyai_env() -> Iterator[EnvServerProcess]:
    server = EnvServerProcess("babyai").start(timeout_s=60)
    yield server
    server.stop()


@pytest.mark.engine
@pytest.mark.parametrize(("phase", "sig"), _matrix(("starting", "working")))
def test_serve_rollouts_stopped_leaves_no_engine_core(
    tiny_model: Path, babyai_env: EnvServerProcess, phase: str, sig: str, tmp_path: Path
) -> None:
    """No learner listens: its episodes run and their groups wait in the buffer."""
    logs = tmp_path / "logs"
    argv = ["serve-rollouts", "--config", str(ROOT / "configs/rollout/babyai_tiny.yaml")]
    argv += [f"model={tiny_model}", f"log_dir={logs}", "status_interval_s=0.5"]
    argv += [f"envs.0.addresses=[{babyai_env.http}]", "engine.max_tokens_per_turn=32"]
    argv += [f"learner.endpoints=[tcp://127.0.0.1:{free_port()}]"]
    w = start_cli(argv, tmp_path)
    try:
        if phase == "starting":
            w.wait_for("vLLM's engine core", lambda: engine_core_started(w))
        else:
            w.wait_for("a finished episode", lambda: _episodes(logs) >= 1)
        w.stop(sig)
        _ended_as_stopped(w, sig, drained=phase == "working")
        w.assert_no_temporary_files()
    finally:
        w.clean_up()


def _episodes(logs: Path) -> int:
    metrics = logs / "metrics.jsonl"
    if not metrics.is_file():
        return 0
    last = metrics.read_text().splitlines()[-1:]
    try:
        return int(json.loads(last[0]).get("episodes", 0)) if last else 0
    except ValueError:
        return 0  # a line still being written


# --- view: in-process, its port -----------------------------------------------------------------
@pytest.mark.parametrize(
    "sig",
    by_signal(),
)
def test_view_stopped_frees_its_port(sig: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    port = free_port()
    w = start_cli(["view", str(run), "--port", str(port)], tmp_path)
    try:
        w.wait_for("its port", lambda: port_bound(port), timeout_s=60)
        w.stop(sig)
        assert not port_bound(port)
    finally:
        w.clean_up()


# --- learn under torchrun: its ranks end with torchrun -----------------------------------------
@pytest.mark.engine
@pytest.mark.parametrize(
    "sig",
    by_signal(),
)
def test_learn_ranks_end_with_their_torchrun(tiny_model: Path, sig: str, tmp_path: Path) -> None:
    """Two ranks wait for groups (no rollout server); torchrun is stopped. Each rank runs in a
    session of its own (torchrun's choice), so a SIGKILLed torchrun's group signal misses
    them: their parent-death signal ends them."""
    argv = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    argv += ["-m", "agentgym_rl.cli", "learn", "--config", "configs/learn/babyai_tiny.yaml"]
    argv += [f"model={tiny_model}", "parallel.dp=2", f"log_dir={tmp_path / 'learn'}"]
    recv = free_port()
    argv += [f"receive.bind=tcp://127.0.0.1:{recv}", "weights=null"]
    argv += [f"checkpoint.dir={tmp_path / 'checkpoints'}"]
    w = start(argv, ROOT)
    try:
        w.wait_for("two ranks", lambda: sum("learn" in c for c in w.cmdlines()) >= 2)
        w.wait_for("rank 0's receiver", lambda: port_bound(recv), timeout_s=120)
        w.stop(sig)
    finally:
        w.clean_up()
