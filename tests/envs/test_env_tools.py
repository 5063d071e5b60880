"""The built-in envs' actions as tools: every env's tool set is a valid set of schemas; on the env
code itself each action an episode plays is written by a call (`ToolSet.call_for`), that call
writes the action back unchanged (`action_for`) and the env accepts it; both protocols
serve the tool set (`GET /tools`, ZeroMQ `tools`) in every HTTP dialect, beside unchanged routes."""

from __future__ import annotations

import json
import random
import re
import shutil
import string
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.envs.conftest import ServerProc

from agentgym_envs import EnvLoadError, entries, env_class
from agentgym_envs.server.base import Environment, Episode
from agentgym_envs.server.tools import generic_tool
from agentgym_rl.episode.tools import ToolCall, ToolSet

BUILT_IN = sorted(name for name, e in entries().items() if e.package.startswith("agentgym-envs"))


def tool_set(cls: type[Environment]) -> ToolSet:
    """The env's tools as the rollout side reads them off the wire."""
    return ToolSet.from_wire(json.loads(json.dumps([t.wire() for t in cls.tool_set()])))


def round_trip(tools: ToolSet, action: str) -> ToolCall:
    """The call that writes `action`, checked to write it back unchanged (its arguments passed
    through JSON, as a model's call arrives)."""
    call = tools.call_for(action)
    assert call is not None, f"no tool writes {action!r}"
    sent = ToolCall(call.name, json.loads(json.dumps(call.arguments)))
    assert tools.action_for(sent) == action, (action, call)
    return call


def play(
    cls: type[Environment],
    episode: Episode,
    ids: range,
    turns: int,
    pick: Callable[[Episode, random.Random], str | None] | None = None,
) -> Counter[str]:
    """Random episodes stepped through the tools: each action's call must write it, and the env
    must accept what the call writes. Returns the tools used, by name."""
    tools, rng, used = tool_set(cls), random.Random(0), Counter[str]()
    for data_idx in ids:
        episode.reset(data_idx)
        for _ in range(turns):
            action = pick(episode, rng) if pick else episode.random_action(rng)
            if action is None:
                break
            call = round_trip(tools, action)
            used[call.name] += 1
            result = episode.step(tools.action_for(call))
            assert not result.invalid, (action, result.observation)
            if result.done:
                break
    return used


def _class(name: str) -> type[Environment]:
    try:
        return env_class(name)
    except EnvLoadError as e:
        if e.missing_module is None:
            raise
        pytest.skip(f"{name} needs {e.missing_module}")


# -- the declarations -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_built_in_env_offers_valid_tool_schemas(name: str) -> None:
    cls = _class(name)
    tools = cls.tool_set()
    assert tools, name
    names = [t.name for t in tools]
    assert len(set(names)) == len(names), names
    for tool in tools:
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tool.name), tool.name
        assert tool.description, tool.name
        params = [p.name for p in tool.params]
        assert len(set(params)) == len(params), tool.name
        placeholders = [f for _, f, _, _ in string.Formatter().parse(tool.action) if f]
        # every placeholder is a param, and every param reaches the action
        assert sorted(set(placeholders)) == sorted(params), (tool.name, tool.action)
        function = tool.schema()["function"]
        assert function["name"] == tool.name
        assert function["parameters"]["type"] == "object"
        assert set(function["parameters"]["required"]) <= set(function["parameters"]["properties"])
        for p in tool.params:
            if not p.required:
                assert p.default is not None, (tool.name, p.name)
    # what the server sends is plain JSON and reads back as a tool set
    assert tool_set(cls).names == names


def test_noop_keeps_the_generic_tool_and_the_others_declare_their_own() -> None:
    assert env_class("noop").tool_set() == (generic_tool(),)
    for name in BUILT_IN:
        if name != "noop":
            assert _class(name).tools, f"{name} declares no tools"


# -- round trips on the env code, in process ------------------------------------------------------


def test_babyai_random_episodes_round_trip() -> None:
    from agentgym_envs.babyai.env import BabyAIEnvironment

    cls = BabyAIEnvironment
    episode = cls().new_episode()
    used = play(cls, episode, range(0, 40, 3), 10)
    # every object-taking tool is met (doors, keys, balls): not only the primitive moves
    assert {"go_to", "pick_up", "go_through", "toggle_and_go_through", "turn_left"} <= set(used)
    tools = tool_set(cls)
    for action in episode.available_actions():  # "check available actions" is listed too
        round_trip(tools, action)
    episode.close()


def test_textcraft_random_episodes_round_trip() -> None:
    from agentgym_envs.textcraft.env import TextCraftEnvironment

    # Its `random_action` plays the crafting commands the observation lists, gets of their
    # gettable ingredients and the inventory: each concrete, written by a tool, never refused.
    cls = TextCraftEnvironment
    env = cls()
    episode = env.new_episode()
    assert episode.random_action(random.Random(0)) is None  # not reset yet
    used = Counter[str]()
    for data_idx in (0, 100, len(env.goals) - 1):
        used += play(cls, episode, range(data_idx, data_idx + 1), 12)
    assert set(used) == {"get", "craft", "inventory"}
    listed = episode.reset(100).observation.split("\n")
    rng, drawn = random.Random(1), Counter[str]()
    for _ in range(200):
        action = episode.random_action(rng)
        assert action is not None
        drawn[action.split(" ", 1)[0]] += 1
        if action.startswith("craft "):
            assert action in listed
        elif action.startswith("get "):
            item = action.split(" ", 2)[2]
            assert any(f" {action[4:]}" in line for line in listed if " using " in line), action
            assert item.replace(" ", "_") in env.graph.gettable, action
    assert drawn["craft"] > 50 and drawn["get"] > 50 and 0 < drawn["inventory"] < 50
    call = tool_set(cls).call_for("craft 4 oak planks using 1 oak log")
    assert call == ToolCall("craft", {"target": "4 oak planks", "ingredients": "1 oak log"})
    won = episode.reset(0)  # a depth-1 goal: random actions craft it soon
    for _ in range(500):
        won = episode.step(episode.random_action(rng) or "")
        if won.done:
            break
    assert won.score == 1.0 and episode.random_action(rng) is None  # none once crafted


def test_searchqa_random_episodes_round_trip() -> None:
    from agentgym_envs.searchqa.env import SearchQAEnvironment

    cls = SearchQAEnvironment
    env = cls(topk="2", prompt="question")  # bm25: built in well under a second
    used = play(cls, env.new_episode(), range(0, 60, 3), 4)
    assert set(used) == {"search", "answer"}
    call = tool_set(cls).call_for("<search> Paris </search>")
    assert call == ToolCall("search", {"query": "Paris"})


def test_maze_and_wordle_random_episodes_round_trip() -> None:
    from agentgym_envs.maze.env import MazeEnvironment
    from agentgym_envs.wordle.env import WordleEnvironment

    maze = MazeEnvironment()
    assert set(play(MazeEnvironment, maze.new_episode(), range(10), 20)) == {"move"}
    assert tool_set(MazeEnvironment).call_for("move up") == ToolCall("move", {"direction": "up"})
    wordle = WordleEnvironment()
    assert set(play(WordleEnvironment, wordle.new_episode(), range(5), 6)) == {"guess"}


WEB_SAMPLES = [  # the commands actions.py documents, as its tests and WebArena write them
    "click [1234]",
    "hover [8]",
    "type [8] [bob] [1]",
    "type [10] [hunter2] [0]",
    "press [Enter]",
    "press [Control+a]",
    "scroll [up]",
    "scroll [down]",
    "goto [http://127.0.0.1:8080/form.html]",
    "new_tab",
    "go_back",
    "go_forward",
    "tab_focus [0]",
    "close_tab",
    "stop [yes]",
    "stop []",
    "stop [It costs $1,000]",
]


@pytest.mark.parametrize("env", ["webarena", "miniwob"])
def test_web_commands_round_trip_and_parse(env: str) -> None:
    """Without a browser: each command's call writes it back, and what any call writes is what
    the env's own parser (the first thing `step` runs) reads as that command."""
    from agentgym_envs.web.actions import parse

    cls = _class(env)
    tools = tool_set(cls)
    for action in WEB_SAMPLES:
        call = round_trip(tools, action)
        assert parse(action).name == call.name, action
    assert {round_trip(tools, a).name for a in WEB_SAMPLES} == set(tools.names)
    typed = parse(tools.action_for(ToolCall("type", {"element_id": 12, "text": "hi"})))
    assert typed.args == ("12", "hi", "1")  # Enter by default, as `type [12] [hi]` does
    assert parse("type [12] [hi]").args[2] != "0"
    no_enter = ToolCall("type", {"element_id": 12, "text": "hi", "press_enter": False})
    assert parse(tools.action_for(no_enter)).args == ("12", "hi", "0")
    bracketed = ToolCall("type", {"element_id": 8, "text": "a] [b"})
    assert parse(tools.action_for(bracketed)).args == ("8", "a] [b", "1")
    assert parse(tools.action_for(ToolCall("stop", {}))).args == ("",)
    assert tools.call_for("stop [done]") == ToolCall("stop", {"answer": "done"})
    assert tools.call_for("click [12]") == ToolCall("click", {"element_id": 12})


# An observation as the web env renders it (observation.py): a form, a <select>, the root.
WEB_TREE = """[1] RootWebArea 'Sign in' focused: True
\t[5] heading 'Sign in'
\t[6] StaticText 'User name'
\t[8] textbox 'User name' required: False
\t[10] searchbox "Search o'clock shop"
\t[11] checkbox 'Keep me signed in' checked: false
\t[12] combobox 'Size' hasPopup: menu expanded: False
\t[13] button 'Log in'
\t\t[14] StaticText 'Log in'"""


def _web_observation(tree: str = WEB_TREE) -> str:
    from agentgym_envs.web.observation import render

    return render(
        "Tab 0 (current): Sign in", tree, "http://x/form.html", "Log in as bob", None, 500
    )


@pytest.mark.parametrize("env", ["webarena", "miniwob"])
def test_web_random_actions_are_concrete_commands_on_the_observation(env: str) -> None:
    """`random_command` (the web episode's `random_action`) on a rendered observation: commands
    `parse` reads, on ids the tree shows (type on its text boxes only), with words of the page
    or the objective; each written back unchanged by a tool call; the same ones for one seed."""
    from agentgym_envs.web.actions import parse, random_command

    tools, obs = tool_set(_class(env)), _web_observation()
    shown = {1, 5, 6, 8, 10, 11, 12, 13, 14}
    words = {"Sign", "in", "User", "name", "Search", "o", "clock", "shop", "Keep", "me", "signed"}
    words |= {"Size", "Log", "as", "bob"}
    rng, drawn = random.Random(0), Counter[str]()
    clicked = Counter[int]()
    for _ in range(600):
        action = random_command(obs, "Log in as bob", rng)
        call = round_trip(tools, action)
        cmd = parse(action)
        assert cmd.name == call.name and cmd.text == action
        drawn[cmd.name] += 1
        if cmd.name in ("click", "hover"):
            assert int(cmd.args[0]) in shown - {1}, action  # not the root: no element's box
            clicked[int(cmd.args[0])] += 1
        elif cmd.name == "type":
            assert cmd.args[0] in ("8", "10") and cmd.args[1] in words and cmd.args[2] in "01"
        elif cmd.name == "stop":
            assert cmd.args[0] in words, action
        else:
            assert action in ("scroll [down]", "scroll [up]", "go_back"), action
    assert set(drawn) == {"click", "hover", "type", "scroll", "stop", "go_back"}
    assert drawn["click"] > drawn["type"] > drawn["scroll"] > drawn["stop"] > 0
    assert set(clicked) == shown - {1}  # every element, the clickable ones most
    assert min(clicked[i] for i in (8, 10, 11, 12, 13)) > max(clicked[i] for i in (5, 6, 14))
    first, second = random.Random(5), random.Random(5)
    assert [random_command(obs, "bob", first) for _ in range(20)] == [
        random_command(obs, "bob", second) for _ in range(20)
    ]
    # ids the page no longer has are passed over; a page with nothing shown still has commands
    for _ in range(100):
        cmd = parse(random_command(obs, "", rng, {6, 13}))
        assert cmd.name != "type" and (
            cmd.name not in ("click", "hover") or cmd.args[0] in ("6", "13")
        )
    for _ in range(50):
        assert parse(random_command(_web_observation(""), "", rng)).name in (
            "scroll",
            "stop",
            "go_back",
        )


def test_web_episode_draws_its_random_actions_from_its_observation() -> None:
    """The episode's wiring, without a browser: its last observation and objective, the ids its
    tabs can address; None before a reset and once the episode is over."""
    from types import SimpleNamespace

    from agentgym_envs.web.actions import parse
    from agentgym_envs.web.env import WebEpisode

    episode = WebEpisode(SimpleNamespace())  # type: ignore[arg-type]
    rng = random.Random(3)
    assert episode.random_action(rng) is None  # not reset
    episode._tabs = SimpleNamespace(targets={8: None, 13: None})  # type: ignore[assignment]
    episode._lease = SimpleNamespace()  # type: ignore[assignment]
    episode._last, episode._objective = _web_observation(), "Log in as bob"
    actions = [episode.random_action(rng) for _ in range(200)]
    names = Counter(parse(a).name for a in actions if a is not None)
    assert None not in actions and {"click", "type", "scroll"} <= set(names)
    for action in actions:
        cmd = parse(action or "")
        if cmd.name in ("click", "hover", "type"):
            assert cmd.args[0] in ("8", "13"), action
    episode._lease = None  # the episode ended (its context closed)
    assert episode.random_action(rng) is None


@pytest.fixture(scope="module")
def sciworld() -> Iterator[Environment]:
    pytest.importorskip("scienceworld")
    if shutil.which("java") is None:
        pytest.skip("SciWorld needs a Java runtime on PATH")
    from agentgym_envs.sciworld.env import SciWorldEnvironment

    env = SciWorldEnvironment(jvms=1, warm=1)
    yield env
    env.close()


RESET_TASK = "reset task"  # a valid action with no tool: it restarts the task mid-episode


@pytest.mark.process
def test_sciworld_valid_actions_round_trip(sciworld: Environment) -> None:
    cls = type(sciworld)
    tools = tool_set(cls)
    used = Counter[str]()

    def pick(episode: Episode, rng: random.Random) -> str:
        by_tool: dict[str, list[str]] = {}
        for action in episode.available_actions():  # every valid one, not only the one stepped
            if action != RESET_TASK:
                by_tool.setdefault(round_trip(tools, action).name, []).append(action)
        used.update({name: len(acts) for name, acts in by_tool.items()})
        # a tool first, so that the many "connect X to Y" do not crowd out the rest
        return rng.choice(by_tool[rng.choice(sorted(by_tool))])

    play(cls, sciworld.new_episode(), range(1436, 1438), 6, pick)
    episode = sciworld.new_episode()
    episode.reset(1436)  # test-conductivity 0: the hallway, a closed door to the kitchen
    for action in ("open door to kitchen", "go to kitchen"):
        assert not episode.step(action).invalid
    pick(episode, random.Random(0))  # the kitchen's actions: pour, dunk, use, activate, ...
    expected = {"look_around", "go_to", "open", "move", "pour", "dunk", "use", "focus_on"}
    assert expected | {"connect", "activate", "deactivate", "look_in", "wait1"} <= set(used)
    # an ambiguous action's numbered list is answered with `choose`
    result = episode.step("look at door")
    assert result.observation.startswith("Ambiguous request"), result.observation
    choice = tools.action_for(ToolCall("choose", {"number": 0}))
    assert choice == "0" and round_trip(tools, "0").name == "choose"
    assert not episode.step(choice).invalid
    episode.close()


# -- served over both protocols -------------------------------------------------------------------


def _served(server: ServerProc, cls: type[Environment]) -> list[dict[str, Any]]:
    wire = json.loads(json.dumps([t.wire() for t in cls.tool_set()]))
    over_http = server.http.get("/tools")
    assert over_http.status_code == 200
    assert over_http.json() == {"tools": wire}
    over_zmq = server.zmq({"op": "tools", "req": 7})
    assert over_zmq == {"ok": True, "req": 7, "tools": wire}
    return wire


@pytest.mark.process
def test_agentgym_dialect_serves_tools_beside_its_routes(spawn: Callable[..., ServerProc]) -> None:
    from agentgym_envs.maze.env import MazeEnvironment

    server = spawn("maze")
    tools = ToolSet.from_wire(_served(server, MazeEnvironment))
    # the AgentGym routes answer as before
    assert server.http.get("/").json() == "This is environment maze."
    created = server.post("/create")
    assert set(created) == {"id"}
    eid = created["id"]
    reset = server.post("/reset", {"id": eid, "data_idx": 3})
    assert set(reset) == {"observation", "reward", "score", "done", "invalid"}
    actions = server.get("/available_actions", id=eid)
    assert actions and all(a.startswith("move ") for a in actions)
    # a call's action steps the served env
    direction = actions[0].removeprefix("move ")
    step = server.post(
        "/step", {"id": eid, "action": tools.action_for(ToolCall("move", {"direction": direction}))}
    )
    assert set(step) == {"observation", "reward", "score", "done", "invalid"}
    assert step["invalid"] is False and step["observation"].startswith(f"You moved {direction}")
    assert server.get("/observation", id=eid) == step["observation"]
    assert server.get("/info")["env"] == "maze"
    assert server.post("/close", {"id": eid}) == {"id": eid, "closed": True}
    assert server.http.post("/tools").status_code == 405


@pytest.mark.process
def test_searchqa_dialect_serves_tools_beside_its_routes(
    spawn: Callable[..., ServerProc], tmp_path_factory: pytest.TempPathFactory
) -> None:
    from agentgym_envs.searchqa.env import SearchQAEnvironment

    cache = tmp_path_factory.mktemp("searchqa-cache")
    server = spawn("searchqa", "--env-option", f"cache_dir={cache}")
    tools = ToolSet.from_wire(_served(server, SearchQAEnvironment))
    assert tools.names == ["search", "answer"]
    eid = server.post("/create", {"id": 0})
    assert isinstance(eid, int)  # the dialect's bare int
    assert isinstance(server.post("/reset", {"id": 0, "env_idx": eid}), str)
    action = tools.action_for(ToolCall("search", {"query": "Paris"}))
    step = server.post("/step", {"env_idx": eid, "action": action})
    assert step["invalid"] is False and step["observation"].startswith("<information>")
    assert server.post("/close", {"env_idx": eid}) is True


# -- `env list -v NAME` ---------------------------------------------------------------------------


def test_env_list_v_shows_one_line_per_tool(capsys: pytest.CaptureFixture[str]) -> None:
    from agentgym_rl.commands.env import _describe

    def shown(name: str) -> list[str]:
        assert _describe(name) == 0
        lines = capsys.readouterr().out.splitlines()
        return lines[lines.index("tools:") + 1 :]

    assert shown("maze") == [
        "  move(direction: up|down|left|right)  Move one cell; a wall refuses the move (it does "
        "not count)."
    ]
    assert shown("noop") == [f"  act(action)  {generic_tool().description}"]
    web = shown("webarena")
    assert len(web) == len(_class("webarena").tool_set())
    assert web[2].startswith("  type(element_id: integer, text, press_enter: boolean = true)  ")
    assert web[-1].startswith('  stop(answer = "")  End the episode')
