"""The env pool against real env servers: lifecycle over both transports, batched steps, a
killed and restarted server, and one exception class per error variant."""

from __future__ import annotations

import asyncio

import pytest

from agentgym_rl import _core as core
from waiting import await_until

TRANSPORTS = ["http", "zmq"]


def address(server, transport: str) -> str:
    return server.http if transport == "http" else server.zmq


def run(coro, timeout: float = 60.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_lifecycle_and_batched_steps(noop_server, transport):
    async def main():
        pool = core.EnvPool([core.EnvServer("noop", address(noop_server, transport))])
        created = await pool.create("noop")
        assert created.server == address(noop_server, transport)
        first = await pool.reset(created.episode, 7)
        assert (first.observation, first.done) == ("task 7", False)
        out = await pool.step(created.episode, "noop")
        assert (out.observation, out.reward, out.done) == ("ok", 0.0, False)
        assert await pool.observation(created.episode) == "ok"
        others = [(await pool.create("noop")).episode for _ in range(5)]
        await asyncio.gather(*(pool.reset(e, 0) for e in others))
        items = [(e, "stop") for e in others] + [(123456, "noop")]
        results = await pool.step_many(items)
        assert all(isinstance(r, core.StepOutcome) and r.done for r in results[:5])
        assert isinstance(results[5], core.UnknownEpisodeError)
        # A refused step (after done) leaves the episode live.
        with pytest.raises(core.EnvRefusedError):
            await pool.step(others[0], "noop")
        assert pool.live_episodes == 6
        for e in [created.episode, *others]:
            await pool.close(e)
        assert pool.live_episodes == 0
        assert noop_server.health()["live_episodes"] == 0
        await pool.shutdown()

    run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_killed_server_fails_its_episodes_and_returns_after_restart(spawn_server, transport):
    a, b = spawn_server("noop"), spawn_server("noop")
    addr_a, addr_b = address(a, transport), address(b, transport)

    async def main():
        pool = core.EnvPool(
            [core.EnvServer("noop", addr_a), core.EnvServer("noop", addr_b)],
            health_interval_s=0.1,
            step_timeout_s=5.0,
        )
        eps = [await pool.create("noop") for _ in range(4)]
        assert sorted(e.server for e in eps) == sorted([addr_a, addr_a, addr_b, addr_b])
        await asyncio.gather(*(pool.reset(e.episode, 0) for e in eps))
        on_a = [e.episode for e in eps if e.server == addr_a]
        on_b = [e.episode for e in eps if e.server == addr_b]

        a.kill()
        results = await pool.step_many([(e, "noop") for e in on_a + on_b])
        assert all(isinstance(r, core.EnvFailureError) for r in results[:2]), results
        assert all(isinstance(r, core.StepOutcome) for r in results[2:]), results
        assert pool.live_episodes == 2

        async def a_down() -> bool:
            return not next(s for s in pool.servers() if s.address == addr_a).up

        await await_until(a_down, 20, "server a seen down")
        for _ in range(3):  # new episodes avoid the dead server
            c = await pool.create("noop")
            assert c.server == addr_b
            await pool.close(c.episode)

        a.start()  # same ports

        async def a_up() -> bool:
            return next(s for s in pool.servers() if s.address == addr_a).up

        await await_until(a_up, 20, "server a seen up again")
        fresh = [await pool.create("noop") for _ in range(2)]
        assert addr_a in {c.server for c in fresh}
        for c in fresh:
            await pool.reset(c.episode, 1)
            assert (await pool.step(c.episode, "noop")).observation == "ok"
        await pool.shutdown()
        assert a.health()["live_episodes"] == 0
        assert b.health()["live_episodes"] == 0

    run(main())


def test_every_error_variant_has_its_exception(noop_server, free_port):
    async def main():
        pool = core.EnvPool([core.EnvServer("noop", noop_server.http)], retries=0)
        with pytest.raises(core.UnknownEnvError):
            await pool.create("nope")
        with pytest.raises(core.UnknownEpisodeError):
            await pool.step(999, "noop")
        c = await pool.create("noop")
        with pytest.raises(core.EnvRefusedError):
            await pool.step(c.episode, "noop")  # not reset yet
        await pool.shutdown()
        with pytest.raises(core.EnvPoolClosedError):
            await pool.create("noop")

        dead = f"http://127.0.0.1:{free_port}"
        no_checks = core.EnvPool([core.EnvServer("noop", dead)], health_interval_s=0, retries=0)
        with pytest.raises(core.EnvConnectionError):
            await no_checks.create("noop")
        checked = core.EnvPool([core.EnvServer("noop", dead)], health_timeout_s=0.2)
        await checked.check_health()
        with pytest.raises(core.NoServerUpError):
            await checked.create("noop")

    with pytest.raises(core.EnvPoolConfigError):
        core.EnvServer("noop", "ftp://x")
    with pytest.raises(core.EnvPoolConfigError):
        core.EnvServer("noop", "http://x", dialect="klingon")
    with pytest.raises(core.EnvPoolConfigError):
        core.EnvPool([])
    with pytest.raises(core.EnvPoolConfigError, match="unknown balance"):
        core.EnvPool([core.EnvServer("noop", "http://x")], balance="random")
    run(main())
    for exc in (
        core.UnknownEnvError, core.NoServerUpError, core.UnknownEpisodeError,
        core.EnvRefusedError, core.EnvTimeoutError, core.EnvConnectionError,
        core.MalformedReplyError, core.HttpStatusError, core.EnvFailureError,
        core.EnvPoolConfigError, core.EnvPoolRuntimeError, core.EnvPoolForkedError,
        core.EnvPoolClosedError,
    ):  # fmt: skip
        assert issubclass(exc, core.EnvPoolError)
    assert issubclass(core.EnvPoolError, core.AgentGymError)


def test_works_under_uvloop(noop_server):
    uvloop = pytest.importorskip("uvloop")

    async def main():
        pool = core.EnvPool([core.EnvServer("noop", noop_server.zmq)])
        eps = await asyncio.gather(*(pool.create("noop") for _ in range(32)))
        await asyncio.gather(*(pool.reset(e.episode, 0) for e in eps))
        outs = await asyncio.gather(*(pool.step(e.episode, "stop") for e in eps))
        assert all(o.done for o in outs)
        await pool.shutdown()
        return noop_server.health()["live_episodes"]

    assert uvloop.run(main()) == 0
