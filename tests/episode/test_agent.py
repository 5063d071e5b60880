"""One episode against real env servers with a scripted engine: arrays, statuses, rewards."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np
import pytest

from agentgym_rl import _core
from agentgym_rl.config import ActionFormat
from agentgym_rl.episode.agent import AgentLoop
from agentgym_rl.episode.dataset import Task
from agentgym_rl.episode.outcome import is_success
from agentgym_rl.episode.turn import episode_reward, turn_shaped_rewards
from agentgym_rl.episode.types import EnvSpec, EpisodePlan, Generation, TurnBudget
from agentgym_rl.processes.env_servers import EnvServerProcess
from agentgym_rl.trajectory import ChatTokenizer
from agentgym_rl.wire.types import Status
from scripted_engine import ScriptedEngine, check_sample_arrays
from textcraft_listing import item_names


def turn_of(request_id: str) -> int:
    return int(request_id.rsplit("-t", 1)[1])


def run(coro: Coroutine[Any, Any, Any], timeout: float = 60.0) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def plan(env: str, idx: int, cap: int, version: int = 0, rid: str = "e0") -> EpisodePlan:
    return EpisodePlan(Task(f"{env}_{idx}", env, idx), version, TurnBudget(cap - 1, cap), rid)


async def episodes(
    address: str,
    engine: ScriptedEngine,
    chat: ChatTokenizer,
    plans: list[EpisodePlan],
    env: str = "noop",
    max_model_len: int = 4096,
    invalid_penalty: float = 0.0,
    action_format: ActionFormat = ActionFormat.REACT,
    turn_cost: float = 0.0,
) -> tuple[list[_core.Sample], AgentLoop]:
    pool = _core.EnvPool([_core.EnvServer(env, address)], step_timeout_s=5.0)
    agent = AgentLoop(
        engine,
        pool,
        chat,
        envs={env: EnvSpec(action_format, invalid_penalty=invalid_penalty, turn_cost=turn_cost)},
        max_model_len=max_model_len,
        max_tokens_per_turn=64,
    )
    try:
        samples = await asyncio.gather(*(agent.run(p) for p in plans))
    finally:
        await pool.shutdown()
    return list(samples), agent


def scripted(fn: Callable[[int], str]) -> Callable[[str, str], str]:
    return lambda prompt, rid: fn(turn_of(rid))


def test_babyai_episodes_are_token_in_token_out(babyai_server: EnvServerProcess, chat) -> None:
    engine = ScriptedEngine(chat)
    prompts: list[tuple[str, list[int]]] = []
    generate = engine.generate

    async def recording(prompt_ids: list[int], **kwargs: Any) -> Generation:
        prompts.append((kwargs["request_id"], list(prompt_ids)))
        return await generate(prompt_ids, **kwargs)

    engine.generate = recording  # type: ignore[method-assign]
    plans = [plan("babyai", i, cap=5, version=3, rid=f"e{i}") for i in range(4)]
    samples, agent = run(episodes(babyai_server.zmq, engine, chat, plans, env="babyai"))
    for i, s in enumerate(samples):
        check_sample_arrays(s)
        assert s.status in {"done", "turn_cap"} and 1 <= s.turns <= 5
        assert (s.turn_cap, s.stage, s.dispatch_version) == (5, 4, 3)
        assert set(s.versions[s.loss_mask == 1].tolist()) == {0} and not s.drift
        assert s.versions[0] == 3  # prompt tokens carry the dispatch version
        text = chat.decode(s.input_ids.tolist())
        assert text.count("Your goal:") >= 1 and "Available actions" in text
        for start, end in s.turn_spans.reshape(-1, 2):
            turn = chat.decode(s.input_ids[start:end].tolist())
            assert turn.startswith("Thought: let me try.\nAction: ") and turn.endswith("<|im_end|>")
        mine = [ids for rid, ids in prompts if rid.startswith(f"e{i}-")]
        assert len(mine) == s.turns
        for ids in mine:  # every prompt the engine saw is a prefix of the final sequence
            assert s.input_ids[: len(ids)].tolist() == ids
    assert agent.metrics.env_steps == sum(s.turns for s in samples)


def test_done_reward_and_turn_cap(noop_server: EnvServerProcess, chat) -> None:
    stop_at_3 = ScriptedEngine(
        chat, scripted(lambda t: "Action: stop" if t == 2 else "Action: noop")
    )
    [done], _ = run(episodes(noop_server.zmq, stop_at_3, chat, [plan("noop", 1, cap=10)]))
    assert (done.status, done.turns, done.reward) == ("done", 3, 1.0)
    never = ScriptedEngine(chat, scripted(lambda t: "Action: noop"))
    [capped], _ = run(episodes(noop_server.http, never, chat, [plan("noop", 1, cap=4)]))
    assert (capped.status, capped.turns, capped.reward, capped.turn_cap) == ("turn_cap", 4, 0.0, 4)
    check_sample_arrays(capped)
    # the observation after the capped last turn is not appended: the sample ends on a turn
    assert capped.loss_mask[-1] == 1


def test_invalid_action_gets_feedback_and_counts(noop_server: EnvServerProcess, chat) -> None:
    engine = ScriptedEngine(chat, scripted(lambda t: "Action: stop" if t == 1 else "I am lost"))
    [s], agent = run(episodes(noop_server.zmq, engine, chat, [plan("noop", 2, cap=5)]))
    assert (s.status, s.turns) == ("done", 2)
    assert agent.metrics.invalid_actions == 1 and agent.metrics.env_steps == 1
    assert "Invalid action format: no line starting with 'Action:'" in chat.decode(
        s.input_ids.tolist()
    )


def test_refused_actions_count_as_invalid_and_the_penalty_ranks_failures(
    babyai_server: EnvServerProcess, chat
) -> None:
    # turns: refused by the env, no action at all, then two accepted turns (GoTo never ends on
    # a turn, so the episode fails at the cap)
    script = {0: "Action: fly to the moon", 1: "I am lost"}
    engine = ScriptedEngine(chat, scripted(lambda t: script.get(t, "Action: turn left")))
    for penalty, reward in ((0.0, 0.0), (0.5, -0.25)):
        [s], agent = run(
            episodes(
                babyai_server.zmq,
                engine,
                chat,
                [plan("babyai", 3, cap=4)],
                "babyai",
                invalid_penalty=penalty,
            )
        )
        assert (s.status, s.turns, s.reward) == ("turn_cap", 4, reward)
        assert agent.metrics.invalid_actions == 2 and agent.metrics.env_steps == 3


def test_episode_reward_keeps_successes_and_env_failures() -> None:
    capped, failed, done = Status.TURN_CAP, Status.ENV_FAILURE, Status.DONE

    def reward(score: float, status: Status, turns: int, invalid: int, cap: int = 8, **spec):  # type: ignore[no-untyped-def]
        return episode_reward(score, status, turns, invalid, EnvSpec(**spec), cap)

    assert reward(0.75, done, 5, 4, invalid_penalty=0.5) == 0.75
    assert reward(0.0, capped, 5, 5, invalid_penalty=0.5) == -0.5
    assert reward(0.0, capped, 5, 0, invalid_penalty=0.5) == 0.0
    assert reward(0.0, failed, 5, 5, invalid_penalty=0.5) == 0.0  # not the policy's doing
    assert reward(0.0, capped, 0, 0, invalid_penalty=0.5) == 0.0
    assert reward(0.0, capped, 4, 2) == 0.0
    # a floor lifts what the agent scored below it (MiniWoB's wrong click), before the penalty
    assert reward(-1.0, done, 1, 0, reward_floor=0.0) == 0.0
    assert reward(-1.0, done, 2, 1, invalid_penalty=0.5, reward_floor=0.0) == -0.25
    assert reward(0.9, done, 2, 0, reward_floor=0.0) == 0.9
    assert reward(-1.0, done, 1, 0) == -1.0
    # a turn cost scales successes by their length, as minigrid; failures keep their reward
    assert reward(1.0, done, 2, 0, turn_cost=0.9) == pytest.approx(0.775)
    assert reward(1.0, done, 8, 0, turn_cost=0.9) > 0.0
    assert reward(0.0, capped, 8, 4, invalid_penalty=0.5, turn_cost=0.9) == -0.25
    assert reward(1.0, done, 3, 0) == 1.0
    assert reward(1.0, done, 3, 0, cap=0, turn_cost=0.9) == 1.0  # no cap known: unscaled


@pytest.mark.parametrize("on", ["each_turn", "last_turn"])
def test_turn_shaped_rewards_land_on_the_turns_that_earned_them(on: str) -> None:
    capped, failed, done = Status.TURN_CAP, Status.ENV_FAILURE, Status.DONE
    each = on == "each_turn"

    def shaped(score, status, deltas, invalid, turns=None, cap=8, **spec):  # type: ignore[no-untyped-def]
        turns = len(deltas) if turns is None else turns
        spec = EnvSpec(shaping_on=on, **spec)  # type: ignore[arg-type]
        got = turn_shaped_rewards(score, status, deltas, invalid, turns, spec, cap)
        whole = episode_reward(score, status, turns, sum(invalid), spec, cap)
        assert sum(got) == pytest.approx(whole)  # the episode's reward either way
        return got

    # a failed episode: the penalty (0.5 x 2 of 4 refused) on the refusals, 0.125 each
    got = shaped(0.0, capped, [0.0] * 4, [False, True, False, True], invalid_penalty=0.5)
    assert got == pytest.approx([0, -0.125, 0, -0.125] if each else [0, 0, 0, -0.25])
    # a success: the cost (0.9 / cap 8 a turn) on every turn, the score where it was made
    got = shaped(1.0, done, [0.0, 0.0, 1.0], [False] * 3, turn_cost=0.9)
    assert got == pytest.approx([-0.1125, -0.1125, 0.8875] if each else [0, 0, 0.6625])
    # a success pays no penalty for its refusals, a failure no cost
    got = shaped(1.0, done, [0.0, 1.0], [True, False], invalid_penalty=0.5)
    assert got == pytest.approx([0.0, 1.0])
    got = shaped(0.0, capped, [0.0, 0.0], [False, False], turn_cost=0.9)
    assert got == pytest.approx([0.0, 0.0])
    # a penalty replaces the env's score (floored MiniWoB's -1): what it replaced is the last's
    got = shaped(-1.0, done, [0.0, -1.0], [True, False], invalid_penalty=0.5, reward_floor=0.0)
    assert got == pytest.approx([-0.25, 0.0] if each else [0.0, -0.25])
    # an env failure is not the policy's doing: the env's own deltas, no penalty
    got = shaped(0.0, failed, [0.0, 0.0], [True, True], invalid_penalty=0.5)
    assert got == pytest.approx([0.0, 0.0])
    # a last turn that left no entry (aborted): its cost is the last entry's
    got = shaped(1.0, done, [0.0, 1.0], [False, False], turns=3, turn_cost=0.9)
    assert got == pytest.approx([-0.1125, 1 - 0.1125 * 2] if each else [0.0, 0.6625])
    assert shaped(0.0, capped, [], [], turns=1, invalid_penalty=0.5) == []


def play_textcraft(
    server: EnvServerProcess,
    chat: ChatTokenizer,
    idx: int,
    scripts: list[list[str]],
    turn_cost: float,
) -> list[_core.Sample]:
    """One episode of TextCraft task `idx` (cap 8) per script of actions, one after another;
    `inventory` once a script runs out."""

    async def play() -> list[_core.Sample]:
        out = []
        for actions in scripts:
            engine = ScriptedEngine(
                chat,
                scripted(lambda t, a=actions: f"Action: {a[t] if t < len(a) else 'inventory'}"),
            )
            [s], _ = await episodes(
                server.zmq,
                engine,
                chat,
                [plan("textcraft", idx, cap=8)],
                "textcraft",
                turn_cost=turn_cost,
                max_model_len=16384,  # eight restated listings
            )
            out.append(s)
        return out

    return list(run(play()))


@pytest.mark.parametrize(("cost", "direct", "detour"), [(0.0, 1.0, 1.0), (0.9, 0.775, 0.6625)])
def test_a_turn_cost_ranks_a_direct_success_above_one_that_repeated_a_refused_craft(
    spawn_server, chat, cost: float, direct: float, detour: float
) -> None:
    """Through the agent loop, the env pool and a real TextCraft server: every success scores 1,
    so without a turn cost the refused craft of a detour trains as well as the direct `get`;
    with one (cap 8) the 2-turn success trains on 1 - 0.9 x 2/8, the 3-turn one on 1 - 0.9 x 3/8."""
    from agentgym_envs.textcraft.env import load

    graph, goals = load()
    idx, recipe = next(
        (i, graph.plan(goal)[0])
        for i, (goal, depth) in enumerate(goals)
        if depth == 1
        and len(graph.plan(goal)[0].ingredients) == 1
        and graph.plan(goal)[0].ingredients[0][0] in graph.gettable
    )
    (item, count), craft = recipe.ingredients[0], recipe.command()
    get = f"get {count} {item.replace('_', ' ')}"
    server = spawn_server("textcraft", "--env-option", "observation=state")
    short, long = play_textcraft(server, chat, idx, [[get, craft], [craft, get, craft]], cost)
    assert (short.status, short.turns, long.status, long.turns) == ("done", 2, "done", 3)
    assert (short.reward, long.reward) == (pytest.approx(direct), pytest.approx(detour))


def test_context_limit_truncates(noop_server: EnvServerProcess, chat) -> None:
    engine = ScriptedEngine(chat, scripted(lambda t: "Action: noop"))
    [s], _ = run(
        episodes(noop_server.zmq, engine, chat, [plan("noop", 3, cap=50)], max_model_len=160)
    )
    assert s.status == "truncated" and len(s) <= 160 and s.turns >= 1
    check_sample_arrays(s)


def test_engine_abort_ends_episode(noop_server: EnvServerProcess, chat) -> None:
    engine = ScriptedEngine(chat, scripted(lambda t: "Action: noop"))

    async def aborting(prompt_ids: list[int], **kwargs: Any) -> Generation:
        if turn_of(kwargs["request_id"]) == 1:
            return Generation([], [], [], "abort")
        return await ScriptedEngine.generate(engine, prompt_ids, **kwargs)

    engine.generate = aborting  # type: ignore[method-assign]
    [s], _ = run(episodes(noop_server.zmq, engine, chat, [plan("noop", 4, cap=5)]))
    assert (s.status, s.turns) == ("aborted", 1)


def test_killed_env_server_flags_env_failure(spawn_server, chat) -> None:
    server = spawn_server("noop")

    def policy(prompt: str, rid: str) -> str:
        if turn_of(rid) == 2:
            server.kill()
        return "Action: noop"

    engine = ScriptedEngine(chat, policy)
    [s], agent = run(episodes(server.http, engine, chat, [plan("noop", 5, cap=10)]))
    assert (s.status, s.turns, s.reward) == ("env_failure", 3, 0.0)
    assert s.env_failure and agent.metrics.env_failures == 1
    check_sample_arrays(s)


def test_env_that_never_starts_is_an_env_failure(chat, free_port: int) -> None:
    engine = ScriptedEngine(chat)
    [s], _ = run(episodes(f"http://127.0.0.1:{free_port}", engine, chat, [plan("noop", 6, cap=3)]))
    assert (s.status, s.turns, s.turn_cap) == ("env_failure", 0, 3)
    assert not np.any(s.loss_mask) and engine.calls == 0


def test_play_says_why_an_episode_failed_in_the_env(spawn_server, chat, free_port: int) -> None:
    server = spawn_server("noop")

    def policy(prompt: str, rid: str) -> str:
        if rid.startswith("killed") and turn_of(rid) == 1:
            server.kill()
        return "Action: noop"

    async def main() -> list[Any]:
        pool = _core.EnvPool(
            [
                _core.EnvServer("noop", server.http),
                _core.EnvServer("never", f"http://127.0.0.1:{free_port}"),
            ],
            step_timeout_s=5.0,
            retries=0,
        )
        agent = AgentLoop(
            ScriptedEngine(chat, policy),
            pool,
            chat,
            envs={},
            max_model_len=4096,
            max_tokens_per_turn=64,
        )
        try:
            fine = await agent.play(plan("noop", 1, cap=1, rid="fine"))
            killed = await agent.play(plan("noop", 2, cap=5, rid="killed"))
            never = await agent.play(plan("never", 3, cap=5, rid="never"))
        finally:
            await pool.shutdown()
        return [fine, killed, never]

    fine, killed, never = run(main())
    assert (fine.sample.status, fine.failure) == ("turn_cap", None)
    assert killed.sample.status == "env_failure" and killed.sample.turns == 2
    assert killed.failure.startswith(f"step: episode 2 on {server.http} ended by an environment")
    assert never.sample.status == "env_failure" and never.sample.turns == 0
    assert never.failure.startswith(f"create: http://127.0.0.1:{free_port}: create connection")


def test_search_turns_end_at_the_closing_tag(noop_server: EnvServerProcess, chat) -> None:
    """Search-R1 format: the engine is asked to stop at </search> or </answer>, so text the model
    goes on to write (a made-up <information> block) is never part of its turn or trained."""
    made_up = "<search>capital of Veltro</search><information>Doc 1(Title: fake) x</information>"
    engine = ScriptedEngine(chat, scripted(lambda t: made_up))
    [s], _ = run(
        episodes(
            noop_server.zmq, engine, chat, [plan("noop", 0, cap=2)], action_format=ActionFormat.TAGS
        )
    )
    assert engine.stops == [("</search>", "</answer>")] * 2
    trained = chat.decode(s.input_ids[s.loss_mask == 1].tolist())
    assert trained.count("<search>capital of Veltro</search>") == 2
    assert "<information>" not in trained and "fake" not in trained

    react = ScriptedEngine(chat, scripted(lambda t: "Action: noop"))
    run(episodes(noop_server.zmq, react, chat, [plan("noop", 0, cap=1)]))
    assert react.stops == [()]  # ReAct turns end only at stop tokens


def test_progress_credit_ranks_failed_episodes_below_successes_through_a_real_server(
    spawn_server, chat
) -> None:
    """TextCraft's `progress_credit` (0.2) through the agent loop, the env pool and a real server,
    with a turn cost of 0.9 over cap 8: a solved depth-2 goal trains on its turn-costed reward, a
    failure that crafted the goal's one intermediate item on 0, one that crafted nothing on -0.2;
    only the first is a success."""
    from agentgym_envs.textcraft.env import load
    from agentgym_envs.textcraft.recipes import Recipe

    graph, goals = load()
    idx = next(
        i
        for i, (goal, depth) in enumerate(goals)
        if depth == 2
        and len(p := graph.plan(goal)) == 2
        and all(item in graph.gettable for item, _ in p[1].ingredients)
        and len(p[0].ingredients) + len(p[1].ingredients) <= 4  # solved within the cap of 8
    )
    goal, inter = graph.plan(goals[idx][0])

    def gets(recipe: Recipe) -> list[str]:
        return [
            f"get {n} {item.replace('_', ' ')}"
            for item, n in recipe.ingredients
            if item in graph.gettable
        ]

    need = dict(goal.ingredients)[inter.result]
    inter = inter.times(-(-need // inter.count))  # as many batches as the goal's recipe needs
    solve = [*gets(inter), inter.command(), *gets(goal), goal.command()]
    halfway = [*gets(inter), inter.command()]
    server = spawn_server(
        "textcraft", "--env-option", "observation=state", "--env-option", "progress_credit=0.2"
    )

    solved, half, none = play_textcraft(server, chat, idx, [solve, halfway, []], 0.9)
    assert (solved.status, solved.turns) == ("done", len(solve))
    assert solved.reward == pytest.approx(1 - 0.9 * len(solve) / 8)
    assert (half.status, none.status) == ("turn_cap", "turn_cap")
    assert (half.reward, none.reward) == (pytest.approx(0.0), pytest.approx(-0.2))
    assert [is_success("textcraft", s.reward) for s in (solved, half, none)] == [1, 0, 0]


@pytest.mark.parametrize("redraw", [False, True])
def test_textcraft_redraw_lists_every_episode_its_own_draw_through_a_real_server(
    spawn_server, chat, redraw: bool
) -> None:
    """TextCraft's `redraw` through the agent loop, the env pool and a real server: three episodes
    of one task open with three different listings; without it, all with the task's own."""
    option = f"redraw={str(redraw).lower()}"
    server = spawn_server("textcraft", "--env-option", "observation=state", "--env-option", option)
    first: dict[str, str] = {}

    def policy(prompt: str, rid: str) -> str:
        first.setdefault(rid.rsplit("-t", 1)[0], prompt)
        return "Action: inventory"

    plans = [plan("textcraft", 40, cap=1, rid=f"e{i}") for i in range(3)]
    engine = ScriptedEngine(chat, policy)
    samples, _ = run(episodes(server.zmq, engine, chat, plans, "textcraft", max_model_len=16384))
    assert [s.status for s in samples] == ["turn_cap"] * 3
    listings = {p.split("Crafting commands:", 1)[1].split("Goal:", 1)[0] for p in first.values()}
    assert len(first) == 3 and len(listings) == (3 if redraw else 1)


@pytest.mark.parametrize("scaled", [False, True])
def test_textcraft_scaled_listing_is_solved_by_copying_its_lines_through_a_real_server(
    spawn_server, chat, scaled: bool
) -> None:
    """TextCraft's `scaled` through the agent loop, the env pool and a real server: the acacia
    fence gate takes 4 sticks. Scaled, its listing says 'craft 4 stick using 8 bamboo' and the
    five actions copied from the listing craft the gate; without the option the same copy of its
    'craft 1 stick using 2 bamboo' makes one stick of four and the gate's craft is refused."""
    from agentgym_envs.textcraft.env import load

    _, goals = load()
    idx = next(i for i, (item, _) in enumerate(goals) if item == "acacia_fence_gate")
    sticks = "craft 4 stick using 8 bamboo" if scaled else "craft 1 stick using 2 bamboo"
    copy = [
        "get 1 acacia log",
        "craft 4 acacia planks using 1 acacia log",
        f"get {sticks.rsplit(' ', 2)[1]} bamboo",
        sticks,
        "craft 1 acacia fence gate using 2 acacia planks, 4 stick",
    ]
    option = f"scaled={str(scaled).lower()}"
    server = spawn_server("textcraft", "--env-option", "observation=state", "--env-option", option)
    [episode] = play_textcraft(server, chat, idx, [copy], 0.0)
    listing = chat.decode(episode.input_ids.tolist()).split("Goal:", 1)[0]
    assert sticks in listing and copy[1] in listing
    assert (episode.status, episode.turns) == (("done", 5) if scaled else ("turn_cap", 8))
    assert is_success("textcraft", episode.reward) == scaled


@pytest.mark.parametrize(
    "menu", ["numbers", "names", "admissible", "admissible-numbers", "renamed"]
)
def test_textcraft_menu_is_played_by_short_actions_through_a_real_server(
    spawn_server, chat, menu: str
) -> None:
    """TextCraft's `menu` through the agent loop, the env pool and a real server: the policy
    answers `Action: 3` (numbers) or `Action: craft stick` (names; `admissible`: names, and the
    menu lists only what the inventory can do; `admissible-numbers`: numbers on that menu, so a
    line's number changes as lines come and go; `renamed`: admissible, with a training goal's
    item names swapped) and the server does that line of the menu. The menu is read off an
    in-process episode of the same task and options (the task's own draw, and so its own
    renaming), so the server must list the same one; the five lines a copy would write, named
    shortly (under the shown names), craft the acacia fence gate, and an action off the menu is
    an invalid turn."""
    from agentgym_envs.textcraft.env import TextCraftEnvironment

    mode, admissible = {
        "admissible": ("names", True),
        "renamed": ("names", True),
        "admissible-numbers": ("numbers", True),
    }.get(menu, (menu, False))
    env = TextCraftEnvironment("state", 1, scaled=True, menu=mode, admissible=admissible)
    idx = next(i for i, (item, _) in enumerate(env.goals) if item == "acacia_fence_gate")
    first = env.new_episode().reset(idx).observation
    shown_as = {}  # real name -> shown name
    if menu == "renamed":
        real = first
        renamed = TextCraftEnvironment(
            "state", 1, scaled=True, menu=mode, admissible=True, rename=True
        )
        first = renamed.new_episode().reset(idx).observation
        shown_as = dict(zip(item_names(real), item_names(first), strict=True))
        assert shown_as["acacia fence gate"] != "acacia fence gate"
    listed = re.findall(r"^(\d+)\. (.+)$", first, re.M)
    lines = [
        "get 1 acacia log",
        "craft 4 acacia planks using 1 acacia log",
        "get 8 bamboo",
        "craft 4 stick using 8 bamboo",
        "craft 1 acacia fence gate using 2 acacia planks, 4 stick",
    ]
    if mode == "numbers":
        # each turn's number of the line, read off the in-process episode as it plays
        episode, script = env.new_episode(), []
        shown = episode.reset(idx).observation
        for line in lines:
            script.append(
                {action: n for n, action in re.findall(r"^(\d+)\. (.+)$", shown, re.M)}[line]
            )
            shown = episode.step(script[-1]).observation
        off_menu = str(len(listed) + 1)
        first_line, refusal = f"1. {listed[0][1]}", f"No action {off_menu}: choose 1-{len(listed)}."
    else:
        names = ["acacia log", "acacia planks", "bamboo", "stick", "acacia fence gate"]
        script = [
            f"{line.split(' ', 1)[0]} {shown_as.get(name, name)}"
            for line, name in zip(lines, names, strict=True)
        ]
        off_menu = "craft bedrock"
        first_line, refusal = first.split("\n\n")[0], "No listed action does 'craft bedrock'."
    options = ["observation=state", "distractors=1", "scaled=true", f"menu={mode}"]
    options += ["admissible=true"] if admissible else []
    options += ["rename=true"] if menu == "renamed" else []
    server = spawn_server("textcraft", *(a for o in options for a in ("--env-option", o)))
    solved, refused = play_textcraft(server, chat, idx, [script, [off_menu] * 8], 0.0)
    assert first_line in chat.decode(solved.input_ids.tolist())
    assert (solved.status, solved.turns) == ("done", 5) and is_success("textcraft", solved.reward)
    assert refused.status == "turn_cap" and not is_success("textcraft", refused.reward)
    assert refusal in chat.decode(refused.input_ids.tolist())


def test_a_misbehaving_plugin_env_fails_its_episodes_and_the_loop_goes_on(
    spawn_server, chat
) -> None:
    """The agent loop and the Rust pool against a plugin env that raises in reset or step or
    returns an observation that is not text (tests/envs/misbehaving.py): each such episode is an
    env failure that says why, counted; a 10 MB observation arrives truncated; the episodes
    after them play as before on the same server."""
    ref = "tests.envs.misbehaving:MisbehavingEnvironment"
    server = spawn_server(ref, "--max-obs-chars", "400")

    async def main() -> tuple[list[Any], AgentLoop]:
        pool = _core.EnvPool([_core.EnvServer("misbehaving", server.zmq)], step_timeout_s=5.0)
        agent = AgentLoop(
            ScriptedEngine(chat, scripted(lambda t: "Action: win")),
            pool,
            chat,
            envs={"misbehaving": EnvSpec(ActionFormat.REACT)},
            max_model_len=4096,
            max_tokens_per_turn=64,
        )
        try:
            played = [
                await agent.play(plan("misbehaving", k, cap=2, rid=f"k{k}"))
                for k in (0, 3, 4, 5, 6, 1)
            ]
        finally:
            await pool.shutdown()
        return played, agent

    played, agent = run(main())
    fine, reset, step, typed, big, after = played
    assert [p.sample.status for p in (reset, step, typed)] == ["env_failure"] * 3
    assert "reset exploded" in reset.failure and "step exploded" in step.failure
    assert "an observation must be a string" in typed.failure
    assert agent.metrics.env_failures == 3
    # the 10 MB observation came back truncated, and the episode went on to its cap
    assert big.sample.status == "turn_cap" and big.failure is None
    assert "observation truncated" in chat.decode(big.sample.input_ids.tolist())
    assert (fine.sample.status, after.sample.status) == ("done", "done")
    assert server.running()
