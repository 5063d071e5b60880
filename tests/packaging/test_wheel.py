"""The two packages as a user installs them, not as a checkout: agentgym-rl's wheel (maturin,
reusing the Cargo target folder, so it takes seconds once `scripts/install.sh` built the
extension) and agentgym-envs' wheel, installed with `--no-deps` into a fresh virtual environment
outside the checkout (`--system-site-packages`: torch, vLLM and Megatron come from the system).
Everything runs from a temporary directory: `agentgym-rl env list`, `env serve babyai` until its
/health answers, `init-model` with its smallest settings and a 2-step `train` whose config names
the shipped split as the shipped configs do (`envs/agentgym_envs/...`, a path that does not exist
from that directory: it resolves inside the installed package)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from env_servers import health, pick_port
from tiny_run import SPLIT, tiny_train_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Venv:
    root: Path
    work: Path
    """The working directory of every command: empty at first, outside the checkout."""

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
        env["VIRTUAL_ENV"] = str(self.root)
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        exe = str(self.root / "bin" / argv[0])
        return subprocess.run(
            [exe, *argv[1:]],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def _check(cmd: list[str | Path], cwd: Path, timeout: float = 600) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    base = tmp_path_factory.mktemp("wheel")
    wheels = base / "wheels"
    # the main wheel: the same release profile and features as scripts/install.sh's build, in the
    # same target/ folder, so cargo reuses what is built
    _check([sys.executable, "-m", "maturin", "build", "--release", "--out", wheels], ROOT)
    # the env wheel, from a copy: setuptools writes build/ next to the sources it builds
    source = base / "envs-src"
    shutil.copytree(ROOT / "envs", source, ignore=shutil.ignore_patterns("__pycache__", "build"))
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    _check([*pip_wheel, "-w", wheels, source], base)
    built = sorted(p.name.split("-")[0] for p in wheels.glob("*.whl"))
    assert built == ["agentgym_envs", "agentgym_rl"]

    root = base / "venv"
    _check([sys.executable, "-m", "venv", "--system-site-packages", root], base)
    pip_install = [root / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-index"]
    _check([*pip_install, *sorted(wheels.glob("*.whl"))], base)
    work = base / "work"
    work.mkdir()
    return Venv(root, work)


DATA = ("corpus.jsonl", "questions.jsonl", "train.json", "test.json")
"""SearchQA's generated knowledge base and splits: package data of the env wheel."""


def test_the_wheels_are_what_imports(venv: Venv) -> None:
    # the checkout's editable installs (.pth files in the system site-packages) come after the
    # venv's own site-packages on sys.path: the wheels must win
    data = [SPLIT, *(f"envs/agentgym_envs/searchqa/data/{f}" for f in DATA)]
    data.append("envs/agentgym_envs/sciworld/data/test.json")
    data.append("envs/agentgym_envs/web/data/webarena_tasks.json")
    script = (
        "import json, agentgym_rl, agentgym_rl._core, agentgym_envs\n"
        "from agentgym_rl.env_discovery import shipped_path\n"
        f"print(json.dumps([agentgym_rl.__file__, agentgym_rl._core.__file__, "
        f"agentgym_envs.__file__, *(str(shipped_path(p).resolve()) for p in {data!r})]))"
    )
    done = venv.run("python", "-c", script)
    assert done.returncode == 0, done.stderr
    site = (venv.root / "lib").resolve()
    for path in json.loads(done.stdout):
        assert Path(path).resolve().is_relative_to(site), path
    assert not (venv.work / "envs").exists()  # the split resolved inside the installed package


def test_env_list(venv: Venv) -> None:
    done = venv.run("agentgym-rl", "env", "list")
    assert done.returncode == 0, done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert names == ["babyai", "miniwob", "noop", "sciworld", "searchqa", "textcraft", "webarena"]


def test_env_serve_answers_health_and_stops_on_sigterm(venv: Venv) -> None:
    port = pick_port()
    exe = str(venv.root / "bin" / "agentgym-rl")
    proc = subprocess.Popen(
        [exe, "env", "serve", "babyai", "--port", str(port)],
        cwd=venv.work,
        env=venv.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                answer = health(port, timeout=0.5)
                break
            except OSError:
                assert time.monotonic() < deadline, "env server not ready in 60 s"
                time.sleep(0.1)  # readiness-probe interval, not a synchronisation point
        assert answer["env"] == "babyai"
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def model(venv: Venv) -> Path:
    done = venv.run(
        "agentgym-rl",
        "init-model",
        "--out=model",
        "--transcripts=24",
        "--max-turns=2",
        "--vocab-size=400",
        "--layers=1",
        "--warmup-steps=10",
        "--warmup-batch=4",
        "--threads=1",
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv.work / "model"


def test_init_model(model: Path) -> None:
    files = {p.name for p in model.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "init_model.json"} <= files
    info = json.loads((model / "init_model.json").read_text())
    # the default split, from the installed package, recorded as configs name it
    assert info["split"] == "envs/agentgym_envs/babyai/data/goto_train.json"


def test_train_two_steps(venv: Venv, model: Path) -> None:
    config = tiny_train_config("run", "model")  # the split named as a wheel user names it
    (venv.work / "train.yaml").write_text(yaml.safe_dump(config))
    done = venv.run("agentgym-rl", "train", "--config", "train.yaml", timeout=900)
    run = venv.work / "run"
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in run.glob("logs/*.log"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + logs

    metrics = (run / "learn" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in metrics] == [1, 2]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["outcome"] == "finished"
    assert (run / "rollout-0" / "metrics.jsonl").is_file() and (run / "plots").is_dir()
