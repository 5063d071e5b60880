"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agentgym_rl.processes import ports
from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.trajectory import ChatTokenizer
from leftovers import Leftover, collect, start_session
from scripted_engine import CHATML
from tiers import forbid_processes, tier_of
from workers import costliest_units_first, make_scheduler

if TYPE_CHECKING:
    from vllm_fixtures import EngineHandle


LEFT_BEHIND: list[Leftover] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    start_session()  # every process the tests start carries this session's mark


@pytest.fixture(autouse=True, scope="module")
def _no_leftovers(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each module, what its tests left running outside pytest's tree is killed and
    reported at the end (`leftovers.py`): a leak costs a line, not the suite's cores."""
    yield
    LEFT_BEHIND.extend(collect(request.module.__name__))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not LEFT_BEHIND:
        return
    terminalreporter.section("processes left behind (killed after their module)")
    for left in LEFT_BEHIND:
        terminalreporter.line(
            f"{left.pid} after {left.found_after}, started in {left.started_by}: {left.command}"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test gets its tier marker (`tiers.py`); under pytest-xdist the costliest files
    come first (`workers.py`)."""
    for item in items:
        item.add_marker(tier_of(item))
    if config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
        costliest_units_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return make_scheduler(config, log)


def _guard(item: pytest.Item) -> AbstractContextManager[None]:
    """A unit test starts no process (`tiers.py`); the other tiers may."""
    unit = item.get_closest_marker("unit") is not None
    return forbid_processes(item.nodeid) if unit else nullcontext()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _guard(item):  # module fixtures first set up for this test included
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guard(item):
        return (yield)


@pytest.fixture(autouse=True)
def _env_references(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without envs remembered by reference (the catalog keeps them in the
    environment, for the processes a run starts): one test's reference never reaches another's
    subprocesses."""
    monkeypatch.setenv("AGENTGYM_RL_ENV_REFERENCES", "")  # and unset again after the test


@pytest.fixture
def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (`agentgym_rl.processes.ports`)."""
    return ports.free_port()


@pytest.fixture
def spawn_server() -> Iterator[Callable[..., EnvServerProcess]]:
    """`spawn_server("noop", *extra_args)` starts an env server; all are stopped (by PID) at
    teardown."""
    started: list[EnvServerProcess] = []

    def spawn(env: str = "noop", *extra: str) -> EnvServerProcess:
        server = EnvServerProcess(env).start(*extra)
        started.append(server)
        return server

    yield spawn
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def babyai_server() -> Iterator[EnvServerProcess]:
    server = EnvServerProcess("babyai").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def noop_server() -> Iterator[EnvServerProcess]:
    server = EnvServerProcess("noop").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chat() -> ChatTokenizer:
    """The ChatML fixture tokenizer (the scripted engine's)."""
    return ChatTokenizer.from_dir(CHATML)


@pytest.fixture(scope="session")
def vllm_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineHandle]:
    """The session's one vLLM engine over a tiny Qwen2 made here (`vllm_fixtures`), started by
    the first test that asks for it and shut down, with its engine-core and worker processes,
    when the session ends."""
    import vllm_fixtures  # torch and vLLM only for the sessions that use an engine

    handle = vllm_fixtures.start(tmp_path_factory)
    yield handle
    handle.close()


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2-135M-Instruct as `init-model --base` prepares it, once a session (`smollm2.py`)."""
    from smollm2 import smollm2_dir

    return smollm2_dir(tmp_path_factory)
