"""SearchQA served by a real server process: a scripted agent that searches entity by entity
solves 1-, 2- and 3-hop questions over the SearchQA HTTP dialect, over ZeroMQ, through the Rust
pool (both transports) and with exactly the requests AgentGym's SearchQA client sends; wrong
answers, bad actions and refused requests answer as documented."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from tests.envs.conftest import ServerProc

from agentgym_envs.searchqa.env import DATA, HINT
from agentgym_envs.searchqa.knowledge import TEMPLATES
from agentgym_rl.processes.ports import free_port

pytestmark = pytest.mark.process

QUESTIONS = [json.loads(line) for line in (DATA / "questions.jsonl").read_text().splitlines()]
# relation -> (the word a search adds to the entity's name, what the passage says)
RELATIONS = {
    "born": ("born", r"was born in the city of (\w+)"),
    "employer": ("organisation", r"went to work for the organisation (.+?) in \d"),
    "country": ("country", r"is a city in the country of (\w+)"),
    "capital": ("capital", r"The capital of .+? is the city of (\w+)"),
    "hq": ("headquartered", r"headquartered in the city of (\w+)"),
    "founder": ("founded", r"was founded by (.+?) in \d"),
    "creator": ("created", r"created by (.+?) in \d"),
}
CHAINS = {name: (text, chain) for _, name, _, text, chain in TEMPLATES}
_DOC = re.compile(r'^Doc \d+\(Title: "(.+?)"\) (.*)$')

Send = Callable[[str], tuple[str, float, bool]]


def first_of_each_hop() -> list[int]:
    return [next(i for i, q in enumerate(QUESTIONS) if q["hops"] == h) for h in (1, 2, 3)]


def solve(question: dict, send: Send) -> tuple[float, bool, int]:
    """Search the question's subject, then each intermediate entity, reading the fact from
    the passage titled with that entity; answer the last one. Returns (reward, done, steps)."""
    text, chain = CHAINS[question["template"]]
    pattern = re.escape(text).replace(re.escape("{}"), "(.+?)") + "$"
    match = re.match(pattern, question["question"])
    assert match is not None, question
    entity = match[1]
    for rel in chain:
        word, fact = RELATIONS[rel]
        info, reward, done = send(
            f"<think>look up {entity}</think><search>{entity} {word}</search>"
        )
        assert info.startswith("<information>") and (reward, done) == (0.0, False)
        docs = [_DOC.match(line) for line in info.removeprefix("<information>").split("\n")]
        found = [m for d in docs if d and d[1] == entity and (m := re.search(fact, d[2]))]
        assert found, (entity, rel, info)
        entity = found[0][1]
    _, reward, done = send(f"<answer>{entity}</answer>")
    return reward, done, len(chain) + 1


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    cache = tmp_path_factory.mktemp("searchqa-cache")
    proc = ServerProc("searchqa", free_port(), "--env-option", f"cache_dir={cache}").wait_ready()
    yield proc
    proc.close()


def test_http_dialect_scripted_agent_solves_every_hop_count(server: ServerProc) -> None:
    for idx in first_of_each_hop():
        eid = server.post("/create", {"id": idx})
        assert isinstance(eid, int)
        prompt = server.get("/observation", env_idx=eid)  # create already loaded item `id`
        assert prompt.endswith(f"Question: {QUESTIONS[idx]['question']}")
        assert server.post("/reset", {"env_idx": eid, "id": idx}) == prompt

        def send(action: str, eid: int = eid) -> tuple[str, float, bool]:
            out = server.post("/step", {"env_idx": eid, "action": action})
            assert set(out) == {"observation", "reward", "done", "info", "score", "invalid"}
            return out["observation"], out["reward"], out["done"]

        reward, done, steps = solve(QUESTIONS[idx], send)
        assert (reward, done, steps) == (1.0, True, QUESTIONS[idx]["hops"] + 1)
        assert server.post("/close", {"env_idx": eid}) is True


def test_zmq_scripted_agent_solves_every_hop_count(server: ServerProc) -> None:
    for idx in first_of_each_hop():
        eid = server.zmq({"op": "create"})["id"]
        first = server.zmq({"op": "reset", "id": eid, "data_idx": idx})
        assert first["observation"].endswith(QUESTIONS[idx]["question"])

        def send(action: str, eid: int = eid) -> tuple[str, float, bool]:
            out = server.zmq({"op": "step", "id": eid, "action": action})
            assert out["ok"], out
            return out["observation"], out["reward"], out["done"]

        assert solve(QUESTIONS[idx], send)[:2] == (1.0, True)
        assert server.zmq({"op": "close", "id": eid})["ok"]


def test_agentgym_searchqa_client_requests_work_unchanged(server: ServerProc) -> None:
    """The paths, bodies and order of AgentGym's SearchQAEnvClient (agentenv/envs/searchqa.py):
    create with {"id": 0}, then per task reset / observation / steps, then close."""
    base = f"http://127.0.0.1:{server.http_port}"
    ok = requests.post(f"{base}/create", json={"id": 0}, timeout=10)
    assert ok.status_code == 200
    env_id = ok.json()
    idx = first_of_each_hop()[1]
    res = requests.post(f"{base}/reset", json={"id": idx, "env_idx": env_id}, timeout=10)
    assert res.status_code == 200 and isinstance(res.json(), str)
    res = requests.get(f"{base}/observation?env_idx={env_id}", timeout=10)
    assert res.status_code == 200 and res.json().endswith(QUESTIONS[idx]["question"])

    def send(action: str) -> tuple[str, float, bool]:
        res = requests.post(f"{base}/step", json={"action": action, "env_idx": env_id}, timeout=10)
        assert res.status_code == 200
        body = res.json()
        return body["observation"], body["reward"], body["done"]

    assert solve(QUESTIONS[idx], send)[:2] == (1.0, True)
    res = requests.post(f"{base}/close", json={"env_idx": env_id}, timeout=10)
    assert res.status_code == 200 and res.json() is True
    assert requests.get(f"{base}/", timeout=10).status_code == 200


def test_wrong_answer_continues_and_bad_action_gets_the_hint(server: ServerProc) -> None:
    eid = server.post("/create", {"id": 0})
    wrong = server.post("/step", {"env_idx": eid, "action": "<answer>Nowhere</answer>"})
    assert (wrong["reward"], wrong["score"], wrong["done"], wrong["invalid"]) == (
        0,
        0,
        False,
        False,
    )
    assert "incorrect" in wrong["observation"]
    bad = server.post("/step", {"env_idx": eid, "action": "I think it is Nowhere."})
    assert (bad["observation"], bad["invalid"], bad["done"]) == (HINT, True, False)
    right = server.post(
        "/step", {"env_idx": eid, "action": f"<answer>{QUESTIONS[0]['golden_answers'][0]}</answer>"}
    )
    assert (right["reward"], right["score"], right["done"]) == (1.0, 1.0, True)
    after = server.post("/step", {"env_idx": eid, "action": "<answer>x</answer>"})
    assert "done" in after["error"]
    assert server.post("/close", {"env_idx": eid}) is True


def test_refusals_in_the_searchqa_dialect(server: ServerProc) -> None:
    live = server.live()
    assert "out of range" in server.post("/create", {"id": len(QUESTIONS)})["error"]
    assert "'id' must be an integer" in server.post("/create", {"id": "3"})["error"]
    assert server.live() == live  # a refused create leaves no episode behind
    assert server.post("/close", {"env_idx": 10**6}) is False  # as the reference answers
    assert "unknown episode" in server.post("/step", {"env_idx": 10**6, "action": "x"})["error"]
    eid = server.post("/create", {})  # no id: item 0
    assert "missing field 'id'" in server.post("/reset", {"env_idx": eid})["error"]
    assert "missing field 'env_idx'" in server.post("/step", {"id": eid, "action": "x"})["error"]
    assert server.get("/available_actions", env_idx=eid) == [
        "<search> query </search>",
        "<answer> answer </answer>",
    ]
    assert server.post("/close", {"env_idx": eid}) is True
    info = server.get("/info")
    assert (info["retriever"], info["http_dialect"]) == ("bm25", "searchqa")
    assert server.get("/health")["env"] == "searchqa"


@pytest.mark.parametrize("transport", ["http", "zmq"])
def test_rust_pool_runs_episodes(server: ServerProc, transport: str) -> None:
    core = pytest.importorskip("agentgym_rl._core")
    address = (
        f"http://127.0.0.1:{server.http_port}"
        if transport == "http"
        else f"tcp://127.0.0.1:{server.zmq_port}"
    )
    dialect = "searchqa" if transport == "http" else "agentgym"

    async def main() -> None:
        pool = core.EnvPool([core.EnvServer("searchqa", address, dialect=dialect)])
        for idx in first_of_each_hop():
            created = await pool.create("searchqa")
            first = await pool.reset(created.episode, idx)
            assert first.observation.endswith(QUESTIONS[idx]["question"]) and not first.done
            outcome = await _drive(pool, QUESTIONS[idx], created.episode)
            assert (outcome.reward, outcome.score, outcome.done) == (1.0, 1.0, True)
            await pool.close(created.episode)
        # Several episodes' searches in one round: one ZMQ batch, one batched retrieval.
        eps = [(await pool.create("searchqa")).episode for _ in range(4)]
        await asyncio.gather(*(pool.reset(e, i) for i, e in enumerate(eps)))
        queries = [f"<search>{q['question']}</search>" for q in QUESTIONS[:4]]
        batched = await pool.step_many(list(zip(eps, queries, strict=True)))
        single = [await pool.step(e, q) for e, q in zip(eps, queries, strict=True)]
        assert [b.observation for b in batched] == [s.observation for s in single]
        for e in eps:
            await pool.close(e)
        await pool.shutdown()

    asyncio.run(asyncio.wait_for(main(), 60))


class _Pending(Exception):
    def __init__(self, action: str, episode: int) -> None:
        self.action, self.episode = action, episode


async def _drive(pool, question: dict, episode: int):
    """Run `solve` against the async pool: replay the agent from the start after each step,
    feeding it the outcomes so far (the agent is deterministic)."""
    outcomes: list = []
    while True:
        replies = iter(outcomes)

        def send(action: str, replies=replies) -> tuple[str, float, bool]:
            out = next(replies, None)
            if out is None:
                raise _Pending(action, episode)
            return out.observation, out.reward, out.done

        try:
            solve(question, send)
            return outcomes[-1]
        except _Pending as pending:
            outcomes.append(await pool.step(episode, pending.action))


def test_dense_server_loads_offline(spawn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dense-retriever server on a small user corpus, with the Hugging Face hub offline and an
    empty hub cache: the MiniLM weights come from the installed package."""
    idx = first_of_each_hop()[0]
    answer = QUESTIONS[idx]["golden_answers"][0]
    lines = (DATA / "corpus.jsonl").read_text().splitlines()
    corpus = [line for line in lines if answer in line][:5] + lines[:100]
    (tmp_path / "c.jsonl").write_text("\n".join(corpus) + "\n")
    (tmp_path / "q.jsonl").write_text(json.dumps(QUESTIONS[idx]) + "\n")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    proc = spawn(
        "searchqa",
        *("--env-option", "retriever=dense", "--env-option", f"cache_dir={tmp_path / 'cache'}"),
        *("--env-option", f"corpus={tmp_path / 'c.jsonl'}"),
        *("--env-option", f"questions={tmp_path / 'q.jsonl'}"),
    )
    assert proc.get("/info")["retriever"] == "dense"
    eid = proc.post("/create", {"id": 0})
    out = proc.post(
        "/step", {"env_idx": eid, "action": f"<search>{QUESTIONS[idx]['question']}</search>"}
    )
    assert answer in out["observation"].split("\n")[0]
