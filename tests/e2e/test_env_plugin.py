"""An env of a user's own, as a user ships it: a tiny package (the guessing game of docs/envs.md) with an
entry point of `agentgym_rl.envs`, pip-installed into a throwaway virtualenv that also sees the
project's packages (never into this test's Python). In that virtualenv `env list` shows it with
its package beside the built-in envs (and a broken plugin as BROKEN, harming nothing), its server
answers both protocols, and `train` runs 2 learner steps on it from a tiny config, with a judge
model's rewards mixed in."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from importlib.metadata import entry_points
from pathlib import Path

import psutil
import pytest
import yaml
from tests.envs.conftest import ServerProc

from agentgym_rl.policy_creation import create_tiny_model
from tiny_run import tiny_train_config
from vllm_fixtures import tiny_corpus

pytestmark = [pytest.mark.engine, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
GAME = (ROOT / "examples" / "guess_env.py").read_text()


def _package(root: Path, name: str, module: str, source: str, entry: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / f"{module}.py").write_text(source)
    (folder / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{name}"
            version = "0.1.0"

            [project.entry-points."agentgym_rl.envs"]
            {entry}

            [tool.setuptools]
            py-modules = ["{module}"]
            """)
    )
    return folder


@pytest.fixture(scope="module")
def plugin_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh virtualenv's Python with the plugin packages installed, seeing ours too."""
    root = tmp_path_factory.mktemp("plugin")
    # without a pip of its own: ours installs into it (`--python`), and no older setuptools
    # of the new venv's shadows ours as the build backend
    venv = [sys.executable, "-m", "venv", "--without-pip", str(root / "venv")]
    subprocess.run(venv, check=True, timeout=120)
    python = str(root / "venv" / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    import site as ours

    # `addsitedir` also reads our site-packages' .pth files (the editable installs)
    lines = [f"import site; site.addsitedir({p!r})" for p in ours.getsitepackages()]
    (Path(site) / "agentgym_rl_project.pth").write_text("\n".join(lines) + "\n")
    packages = [
        _package(
            root, "guess-plugin", "guess_plugin", GAME, 'guess = "guess_plugin:GuessEnvironment"'
        ),
        _package(
            root,
            "broken-plugin",
            "broken_plugin",
            "raise RuntimeError('this plugin is misconfigured')\n",
            'broken = "broken_plugin:Env"',
        ),
    ]
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps"]
    pip += ["--no-build-isolation"]
    subprocess.run([*pip, "--no-index", *map(str, packages)], check=True, timeout=300)
    return python


def _judge_servers(model: Path) -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["cmdline"])
        if "vllm.entrypoints.openai" in " ".join(p.info["cmdline"] or [])
        and str(model) in " ".join(p.info["cmdline"] or [])
    ]


def _kill_the_judge_once_it_answered(run: Path, model: Path, proc: subprocess.Popen[bytes]) -> bool:
    """SIGKILL to the judge server's process group once the run's metrics count a judge call."""
    metrics = run / "rollout-0" / "metrics.jsonl"
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        lines = metrics.read_text().splitlines() if metrics.exists() else []
        if lines and json.loads(lines[-1]).get("judge_calls", 0) > 0:
            for server in _judge_servers(model):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.pid, signal.SIGKILL)
            return True
        time.sleep(0.5)
    return False


def _cli(
    python: str, *args: str, cwd: Path = ROOT, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-m", "agentgym_rl.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def test_never_installed_into_the_tests_own_python(plugin_python: str) -> None:
    assert "guess" not in {point.name for point in entry_points(group="agentgym_rl.envs")}


def test_env_list_shows_the_plugin_beside_the_built_ins(plugin_python: str) -> None:
    done = _cli(plugin_python, "env", "list")
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert "guess-plugin 0.1.0" in lines["guess"] and "secret number" in lines["guess"]
    assert "BROKEN" in lines["broken"] and "this plugin is misconfigured" in lines["broken"]
    assert {"babyai", "maze", "wordle"} <= set(lines) and "BROKEN" not in lines["babyai"]
    assert _cli(plugin_python, "env", "list", "--strict").returncode == 1
    detail = _cli(plugin_python, "env", "list", "-v", "guess").stdout
    assert "splits:         train, test" in detail and "Find the secret number" in detail


def test_the_plugin_is_served_over_both_protocols(plugin_python: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ServerProc("guess", port, python=plugin_python).wait_ready()
    try:
        assert server.get("/info")["splits"] == ["train", "test"]
        eid = server.post("/create")["id"]
        first = server.post("/reset", {"id": eid, "data_idx": 3})["observation"]
        assert "Guess the secret number" in first
        refused = server.post("/step", {"id": eid, "action": "eleven"})
        assert refused["invalid"] is True and refused["done"] is False
        replies = [server.post("/step", {"id": eid, "action": str(n)}) for n in range(1, 11)]
        won = next(r for r in replies if r["done"])
        assert won["reward"] == 1.0 and "Right!" in won["observation"]
        zid = server.zmq({"op": "create"})["id"]
        assert server.zmq({"op": "reset", "id": zid, "data_idx": 3})["ok"]
        step = server.zmq({"op": "step", "id": zid, "action": "11"})
        assert step["ok"] and step["invalid"] is True
    finally:
        server.terminate()
        server.close()


def test_train_runs_two_steps_on_the_plugin_with_a_judges_rewards(
    plugin_python: str, tmp_path: Path
) -> None:
    """`train` on the plugin's env, its rewards mixed with a judge model's (`env+judge`): the
    tiny model also judges, a local HF folder, so the rollout server starts vLLM's
    OpenAI-compatible server for it as a child of its own, its replies constrained to `k: x`
    lines by guided decoding so that every one parses. The learner trains on the mixed rewards,
    every logged episode keeps the judge's prompt, reply and score beside the env's verdict, the
    rollout metrics count the judge's calls, and the judge's server is gone with the run. The
    judge's server is killed (SIGKILL to its process group) once it has answered: the rollout
    server restarts it and the run goes on, no group lost. (The judge's own cases, with scripted
    judges: tests/judging.)"""
    model = create_tiny_model(tmp_path / "model", corpus=tiny_corpus(), vocab_size=320, seed=0)
    run = tmp_path / "run"
    config = tiny_train_config(str(run), str(model), max_steps=3)
    config["env_servers"] = [{"env": "guess", "replicas": 1, "transport": "zmq"}]
    config["rollout"]["dataset"] = {"env": "guess", "split": "train", "group_size": 2}
    judge = {"model": str(model), "mode": "group", "max_model_len": 2048, "max_in_flight": 4}
    judge["message_chars"] = 150  # two attempts' turns within the tiny judge's context
    reward = {"source": "env+judge", "judge": judge, "judge_weight": 0.5}
    config["rollout"]["envs"] = [{"env": "guess", "reward": reward}]
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = [plugin_python, "-m", "agentgym_rl.cli", "train", "--config", str(path)]
    with subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        killed = _kill_the_judge_once_it_answered(run, model, proc)
        out = proc.communicate(timeout=900)[0].decode(errors="replace")
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in (run / "logs").glob("*.log"))
    assert proc.returncode == 0, out + logs
    assert killed, "the run ended before its judge answered"
    steps = [json.loads(line)["step"] for line in (run / "learn" / "metrics.jsonl").open()]
    assert steps == [1, 2, 3]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "finished" and summary["groups"]["balanced"]

    episodes = [json.loads(line) for line in (run / "rollout-0" / "episodes.jsonl").open()]
    assert episodes and all(e["item_id"].startswith("guess_") for e in episodes)
    for e in episodes:
        verdict = e["judge"]
        assert verdict["mode"] == "group" and 0.0 <= verdict["score"] <= 1.0
        assert "Attempt 1:" in verdict["prompt"] and "Guess the secret number" in verdict["prompt"]
        assert verdict["reply"].startswith("1: ")
        assert e["reward"] == pytest.approx(0.5 * verdict["env_reward"] + 0.5 * verdict["score"])
        assert verdict["success"] == e["success"]  # env+judge keeps the env's verdict
    last = json.loads((run / "rollout-0" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["judge_calls"] >= 4 and last["judge_unparsed"] == 0
    # no group lost to the judge's death: each was judged, the killed server's calls asked again
    assert last["judge_failed_groups"] == 0 and last["judged_episodes"] >= len(episodes)

    log = (run / "rollout-0" / "judge-0.log").read_text()
    assert "vllm.entrypoints.openai.api_server" in log.splitlines()[0]
    starts = [line for line in log.splitlines() if " start: " in line]
    assert len(starts) == 2, "the killed judge server was started again"
    left = [p.pid for p in _judge_servers(model)]
    assert left == [], "the judge's server outlived its run"
