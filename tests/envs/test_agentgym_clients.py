"""Our env servers driven over HTTP exactly as AgentGym's own clients drive theirs
(`agentenv/agentenv/envs/{babyai,textcraft,webarena}.py` at 3ef9235, read for their wire use;
none of their code): the same requests and bodies, the same reply fields read, the same action
preprocessing, and the episode's reward as AgentGym's task loop keeps it: the last step's
(`score` for BabyAI, `reward` for TextCraft and WebArena). SciWorld's and SearchQA's clients are
checked the same way in `test_sciworld_server.py` and `test_searchqa_server.py`; MiniWoB has no
AgentGym client (it speaks the WebArena client's dialect: `test_miniwob.py`)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from tests.envs.conftest import ServerProc

from agentgym_envs.web.webarena import TASKS_FILE

TIMEOUT_S = 30
_ACTION_LINE = re.compile(r"Action:\s*(.*?)(?=\n|$)")


def react_action(reply: str) -> str | None:
    """BabyAI's and TextCraft's clients: the one `Action:` line's text, kept to letters, digits,
    commas and single spaces; None (nothing is sent) when the reply has several."""
    found = _ACTION_LINE.findall(reply)
    if len(found) > 1:
        return None
    kept = re.sub(r"[^A-Za-z0-9, ]", "", found[-1] if found else "")
    return " ".join(kept.split())


@dataclass
class Step:
    state: str
    reward: float
    done: bool


class AgentGymClient:
    """One env client as AgentGym writes them: `/create` at construction, then reset/observe/
    step; `key` names the id in bodies and queries, `remote_observe` whether `observe` asks the
    server (WebArena) or returns what reset or the last step said (BabyAI, TextCraft)."""

    def __init__(self, base: str, *, create_body: dict[str, Any] | None, key: str) -> None:
        self.base, self.key = base, key
        ok = requests.post(f"{base}/create", json=create_body, timeout=TIMEOUT_S)
        assert ok.status_code == 200
        self.env_id = int(ok.json()[key])

    def post(self, path: str, body: dict[str, Any]) -> Any:
        res = requests.post(
            f"{self.base}/{path}", json={**body, self.key: self.env_id}, timeout=TIMEOUT_S
        )
        assert res.status_code == 200
        return res.json()

    def get(self, path: str) -> Any:
        res = requests.get(f"{self.base}/{path}?{self.key}={self.env_id}", timeout=TIMEOUT_S)
        assert res.status_code == 200
        return res.json()


def play(
    client: AgentGymClient,
    observe: Callable[[], str],
    step: Callable[[str], Step],
    policy: Callable[[str], str],
    max_rounds: int,
) -> tuple[float, list[Step]]:
    """AgentGym's task loop after `reset`: observe once, then reply and step until done or
    `max_rounds`; the episode's reward is the last step's."""
    state, steps = observe(), []
    while len(steps) < max_rounds:
        out = step(policy(state))
        steps.append(out)
        state = out.state
        if out.done:
            break
    return steps[-1].reward, steps


# -- BabyAI ------------------------------------------------------------------------------------


def test_babyai_client(babyai: ServerProc) -> None:
    client = AgentGymClient(f"http://127.0.0.1:{babyai.http_port}", create_body=None, key="id")
    first = client.post("reset", {"data_idx": 9})
    info = {k: first[k] for k in ("observation", "reward", "score", "done")}
    assert not info["done"]

    def step(reply: str) -> Step:
        action = react_action(reply)
        assert action is not None
        out = client.post("step", {"action": action})
        info.update({k: out[k] for k in ("observation", "reward", "score", "done")})
        return Step(out["observation"], out["score"], out["done"])

    mission = info["observation"].split("\n", 1)[0]
    target = " ".join(mission.split()[-2:])  # "Your goal: go to the red ball" -> "red ball"
    replies = iter(["Thought: not there yet.\nAction: turn left!", f"Action: go to {target} 1"])
    reward, steps = play(client, lambda: info["observation"], step, lambda _: next(replies), 5)
    assert [s.done for s in steps] == [False, True] and reward > 0
    assert client.post("close", {}) == {"id": client.env_id, "closed": True}


# -- TextCraft ---------------------------------------------------------------------------------

_CRAFT = re.compile(r"^craft (\d+) (.+?) using (.+)$")


class Crafter:
    """Crafts the goal from the commands its observation lists, getting what no command makes."""

    def __init__(self, observation: str) -> None:
        self.recipes: dict[str, tuple[int, list[tuple[int, str]]]] = {}
        for line in observation.split("\n"):
            if m := _CRAFT.match(line):
                parts = [p.split(" ", 1) for p in m[3].split(", ")]
                self.recipes.setdefault(m[2], (int(m[1]), [(int(n), i) for n, i in parts]))
        self.goal = observation.rsplit("Goal: craft ", 1)[1].removesuffix(".")

    def plan_goal(self) -> list[str]:
        return self.plan(self.goal, 1)

    def plan(self, item: str, count: int) -> list[str]:
        if item not in self.recipes:
            return [f"get {count} {item}"]
        out, ingredients = self.recipes[item]
        batches = -(-count // out)
        need = [(n * batches, i) for n, i in ingredients]
        steps = [s for n, i in need for s in self.plan(i, n)]
        using = ", ".join(f"{n} {i}" for n, i in need)
        return [*steps, f"craft {out * batches} {item} using {using}"]


def test_textcraft_client(textcraft: ServerProc) -> None:
    base = f"http://127.0.0.1:{textcraft.http_port}"
    # its create names a minecraft folder, commands and goal; our server ignores them
    body = {"minecraft_dir": "agentenv_textcraft/", "commands": None, "goal": None}
    client = AgentGymClient(base, create_body=body, key="id")
    idx = next(i for i in range(50) if len(Crafter(_reset(client, i)).plan_goal()) <= 4)
    info = {"observation": _reset(client, idx)}
    plan = iter(Crafter(info["observation"]).plan_goal())

    def step(reply: str) -> Step:
        action = react_action(reply)
        assert action is not None
        out = client.post("step", {"action": action})
        info["observation"] = out["observation"]
        return Step(out["observation"], out["reward"], out["done"])

    reward, steps = play(
        client,
        lambda: info["observation"],
        step,
        lambda _: f"Thought: ok.\nAction: {next(plan)}",
        8,
    )
    assert steps[-1].done and reward == 1.0
    assert all(s.reward == 0 for s in steps[:-1])


def _reset(client: AgentGymClient, idx: int) -> str:
    return str(client.post("reset", {"data_idx": idx})["observation"])


# -- WebArena ----------------------------------------------------------------------------------


def fenced(thought: str, command: str) -> str:
    """A reply in the form AgentGym's WebArena prompt asks for."""
    return f"{thought} In summary, the next action I will perform is ```{command}```"


def _id(observation: str, role: str, name: str) -> str:
    found = re.search(rf"\[(\d+)\] {role} '{re.escape(name)}'", observation)
    assert found is not None, f"no {role} {name!r} in:\n{observation}"
    return found.group(1)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_webarena_client(spawn: Callable[..., ServerProc]) -> None:
    server = spawn("webarena")
    base = f"http://127.0.0.1:{server.http_port}"
    task = json.loads(TASKS_FILE.read_text())[0]  # a product's price
    product = task["instantiation_dict"]["product"]
    client = AgentGymClient(base, create_body=None, key="env_idx")  # `/create` with no body
    reset = client.post("reset", {"seed": 0, "idx": 0})
    assert set(reset) == {"observation"} and task["intent"] in reset["observation"]

    def step(reply: str) -> Step:
        out = client.post("step", {"action": reply})  # the whole reply, as that client sends it
        assert {"observation", "reward", "terminated", "truncated", "info"} <= set(out)
        return Step(out["observation"], out["reward"], out["terminated"])

    def policy(state: str) -> str:  # search, open the product, read its price
        if "PREVIOUS ACTION: None" in state:
            box = _id(state, "searchbox", "Search products")
            return fenced("I search for it.", f"type [{box}] [{product}] [1]")
        price = re.search(r"StaticText '\$(\d+\.\d\d)'", state)
        if price is None:
            return fenced("Open it.", f"click [{_id(state, 'link', product)}]")
        return fenced("Found it.", f"stop [${price.group(1)}]")

    unfenced = step("I will click the first link.")  # no fence: an invalid action, no step
    assert (unfenced.reward, unfenced.done) == (0.0, False) and "invalid action" in unfenced.state
    reward, steps = play(client, lambda: client.get("observation"), step, policy, 6)
    assert steps[-1].done and reward == 1.0 and len(steps) == 3
    assert all(s.reward == 0.0 for s in steps[:-1])  # paid only when the episode ends
    assert client.post("close", {})["closed"] is True
