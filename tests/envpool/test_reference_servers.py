"""The pool against stand-ins of AgentGym's own servers (tests/agentgym_reference.py: their
endpoint set and reply shapes at commit 3ef9235, no `/health`), each a real uvicorn process:
health checks keep them up, every reply shape decodes, and a server marked down says why."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest

from agentgym_rl import _core as core
from asgi_procs import AsgiProc

pytestmark = pytest.mark.process

GOAL_ACTION = {
    "babyai": "go to red ball 1",
    "textcraft": "craft 1 oak planks using 1 oak log",
    "sciworld": "focus on water",
}


@pytest.fixture
def reference() -> Iterator[Callable[..., AsgiProc]]:
    """`reference("babyai", legacy=False)` serves a stand-in; all are stopped at teardown."""
    started: list[AsgiProc] = []

    def serve(env: str, *, legacy: bool = False) -> AsgiProc:
        variables = {"AGENTGYM_REFERENCE_ENV": env}
        if legacy:
            variables["AGENTGYM_REFERENCE_ROUTES"] = "legacy"
        proc = AsgiProc("agentgym_reference:app", variables).start()
        started.append(proc)
        return proc

    yield serve
    for proc in started:
        proc.stop()


def run(coro, timeout: float = 60.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


@pytest.mark.parametrize("env", ["babyai", "textcraft", "sciworld"])
def test_reference_server_stays_up_and_plays_an_episode(reference, env):
    server = reference(env)
    assert server.get("/health")[0] == 404  # the reference has no health endpoint
    assert server.get("/")[1].decode().startswith('"This is environment ')

    async def main():
        pool = core.EnvPool([core.EnvServer(env, server.url)], health_interval_s=0.05)
        for _ in range(3):  # the background probes run too, every 50 ms
            await pool.check_health()
        (status,) = pool.servers()
        assert status.up, status
        assert status.generation == 0  # staying up is not a restart

        created = await pool.create(env)
        if env == "textcraft":  # create also resets, to task `id`
            assert created.first is not None
            assert created.first.observation.startswith("Crafting commands:")
        else:
            assert created.first is None
        first = await pool.reset(created.episode, 3)
        # SciWorld's task description goes before its look-around (as its own client shows it)
        expected = {
            "babyai": "Your goal:",
            "textcraft": "Crafting commands:",
            "sciworld": "Your task is to boil water.\nThis room",
        }
        assert first.observation.startswith(expected.get(env, "This room"))
        assert (first.reward, first.score, first.done) == (0.0, 0.0, False)

        miss = await pool.step(created.episode, "dance")
        assert (miss.reward, miss.done, miss.invalid) == (0.0, False, False)
        assert await pool.observation(created.episode) == miss.observation
        win = await pool.step(created.episode, GOAL_ACTION[env])
        reward = {"babyai": 0.9, "textcraft": 1.0, "sciworld": 100.0}[env]
        assert (win.reward, win.score, win.done) == (reward, reward, True)
        if env != "textcraft":  # a finished episode refuses steps, as HTTP 200 {"error"}
            with pytest.raises(core.EnvRefusedError, match="has finished"):
                await pool.step(created.episode, "turn left")
        await pool.close(created.episode)
        assert pool.live_episodes == 0
        await pool.shutdown()

    run(main())


def test_older_babyai_without_observation_and_close(reference):
    """BabyAI servers before `/observation` and `/close` existed: closing is a no-op."""
    server = reference("babyai", legacy=True)
    assert server.get("/observation?id=0")[0] == 404

    async def main():
        pool = core.EnvPool([core.EnvServer("babyai", server.url)], health_interval_s=0.05)
        await pool.check_health()
        created = await pool.create("babyai")
        await pool.reset(created.episode, 0)
        assert (await pool.step(created.episode, GOAL_ACTION["babyai"])).done
        await pool.close(created.episode)  # POST /close -> 404: nothing to free
        assert pool.live_episodes == 0
        with pytest.raises(core.HttpStatusError):
            await pool.observation((await pool.create("babyai")).episode)
        await pool.shutdown()

    run(main())


def test_a_server_marked_down_says_why(free_port):
    dead = f"http://127.0.0.1:{free_port}"

    async def main():
        pool = core.EnvPool([core.EnvServer("babyai", dead)], health_interval_s=0.05)
        await pool.check_health()
        (status,) = pool.servers()
        assert not status.up
        with pytest.raises(core.NoServerUpError) as caught:
            await pool.create("babyai")
        message = str(caught.value)
        assert message.startswith(f'no server of environment "babyai" is up: {dead} marked down')
        assert "health connection failed (not sent)" in message
        await pool.shutdown()

    run(main())


def test_our_server_keeps_the_richer_health_report(noop_server):
    """Our servers answer `/health` (live count, uptime: what notices a restart); the fallback
    to `/` must not lose that."""

    async def main():
        pool = core.EnvPool([core.EnvServer("noop", noop_server.http)], health_interval_s=0.05)
        created = await pool.create("noop")
        await pool.check_health()
        (status,) = pool.servers()
        assert status.up and status.uptime_s is not None and status.uptime_s > 0
        assert status.reported_live_episodes == 1
        await pool.close(created.episode)
        await pool.shutdown()

    run(main())
