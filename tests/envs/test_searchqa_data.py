"""SearchQA in-process: exact-match scoring, the action parser, the generated data (deterministic,
sized, split as documented), user-supplied files and the errors bad files give."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from agentgym_envs import load_env
from agentgym_envs.searchqa import make_data
from agentgym_envs.searchqa.env import DATA, HINT, SearchQAEnvironment
from agentgym_envs.searchqa.knowledge import EXTRA_ONE_HOP, QUESTIONS
from agentgym_envs.searchqa.scoring import exact_match, normalize_answer, parse_action


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  an   Apple, a day!  ", "apple day"),
        ("Orvane-Guild.", "orvaneguild"),
        ("THEATRE", "theatre"),  # articles only as whole words
        ("A", ""),
        ("", ""),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_exact_match_against_any_golden_answer() -> None:
    assert exact_match("the drumaven", ["Kelt", "Drumaven"])
    assert exact_match(" Drumaven. ", ["drumaven"])
    assert not exact_match("Drumaven city", ["Drumaven"])  # exact, not substring
    assert not exact_match("", ["Drumaven"])


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("<search>who is x</search>", ("search", "who is x")),
        ("<think>hm</think>\n<SEARCH>  a\n b </SEARCH>", ("search", "a b")),
        ("<answer>Rome</answer><search>q</search>", ("answer", "Rome")),  # the first tag wins
        ("<search>q</search><answer>Rome</answer>", ("search", "q")),
        ("<search></search>", None),
        ("<search>unclosed", None),
        ("just text", None),
    ],
)
def test_parse_action(action: str, expected: tuple[str, str] | None) -> None:
    assert parse_action(action) == expected


def test_generator_is_deterministic(tmp_path: Path) -> None:
    make_data.write(tmp_path)
    shipped = ("corpus.jsonl", "questions.jsonl", "train.json", "test.json")
    for name in (*shipped, "train_1hop.json", "test_1hop.json"):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name


def test_shipped_data_sizes_and_splits() -> None:
    corpus = (DATA / "corpus.jsonl").read_text().splitlines()
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").read_text().splitlines()]
    assert len(corpus) >= 5000 and len(questions) >= 2000
    assert sum(p.stat().st_size for p in DATA.iterdir()) < 3_000_000
    words = [len(json.loads(line)["contents"].split("\n", 1)[1].split()) for line in corpus]
    assert 15 <= min(words) and max(words) <= 40
    hops = Counter(q["category"] for q in questions)
    assert set(hops) == {"1-hop", "2-hop", "3-hop"} and min(hops.values()) >= 300
    test = json.loads((DATA / "test.json").read_text())
    train = json.loads((DATA / "train.json").read_text())
    test_ids = {r["item_id"] for r in test}
    assert not test_ids & {r["item_id"] for r in train}
    assert len(test_ids) + len(train) == len(questions)
    assert Counter(r["category"] for r in test)["1-hop"] >= 200
    for row in test + train:
        n = int(row["item_id"].removeprefix("searchqa_"))
        assert row["category"] == questions[n]["category"]
        assert row["reference"] == questions[n]["golden_answers"][0]  # what a judge is shown
    for name, split in (("test_1hop.json", test), ("train_1hop.json", train)):
        one_hop = [r for r in split if r["category"] == "1-hop"]
        assert json.loads((DATA / name).read_text()) == one_hop, name
    # Every 1-hop question names its subject, and its answer is an entity name.
    for q in questions:
        assert q["golden_answers"][0] not in q["question"]


def test_extra_one_hop_questions_train_only_on_new_subjects() -> None:
    """The questions after the base set are 1-hop training questions about subjects that no
    earlier question of their template asked about (none is a held-out question's twin)."""
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").read_text().splitlines()]
    base = sum(QUESTIONS.values())
    extra = questions[base:]
    assert len(extra) == EXTRA_ONE_HOP and {q["category"] for q in extra} == {"1-hop"}
    test_ids = {r["item_id"] for r in json.loads((DATA / "test.json").read_text())}
    assert not test_ids & {q["id"] for q in extra}
    asked = Counter((q["template"], q["question"]) for q in questions)
    assert max(asked.values()) == 1


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def user_files(tmp_path: Path) -> tuple[Path, Path]:
    corpus = _write(
        tmp_path / "wiki.jsonl",
        [
            {"id": "a", "contents": '"Zorblax"\nZorblax is the tallest tower in Quinmoor.'},
            {"id": "b", "contents": '"Quinmoor"\nQuinmoor is a harbour town of fishers.'},
            {"id": "c", "contents": '"Pelm"\nPelm is a river.'},
        ],
    )
    questions = tmp_path / "qa.json"  # a JSON list, as Search-R1's exports also are
    questions.write_text(
        json.dumps(
            [
                {
                    "question": "Where is Zorblax?",
                    "golden_answers": ["Quinmoor"],
                    "data_source": "x",
                },
                {"question": "What is Pelm?", "golden_answers": "a river", "hops": 1},
            ]
        )
    )
    return corpus, questions


def test_user_supplied_corpus_and_questions(user_files: tuple[Path, Path], tmp_path: Path) -> None:
    corpus, questions = user_files
    env = load_env(
        "searchqa",
        corpus=str(corpus),
        questions=str(questions),
        cache_dir=str(tmp_path / "cache"),
        topk="2",
        passage_words="3",
        prompt="question",
    )
    assert env.num_tasks() == 2 and env.info()["categories"] == {"1-hop": 1, "x": 1}
    ep = env.new_episode()
    assert ep.reset(0).observation == "Question: Where is Zorblax?"
    info = ep.step("<search>Zorblax tower</search>").observation
    assert info.startswith('<information>Doc 1(Title: "Zorblax") Zorblax is the\nDoc 2(')
    assert info.endswith("</information>") and "Doc 3" not in info
    wrong = ep.step("<answer>Pelm</answer>")
    assert (wrong.reward, wrong.done, wrong.invalid) == (0.0, False, False)
    hint = ep.step("Quinmoor")
    assert (hint.observation, hint.invalid, hint.done) == (HINT, True, False)
    right = ep.step("<answer> the quinmoor </answer>")
    assert (right.reward, right.score, right.done) == (1.0, 1.0, True)
    ep.reset(1)
    assert ep.step("<answer>River</answer>").done  # "a river" normalises to "river"


def test_end_on_wrong_option(user_files: tuple[Path, Path], tmp_path: Path) -> None:
    corpus, questions = user_files
    env = SearchQAEnvironment(
        corpus=str(corpus), questions=str(questions), cache_dir=str(tmp_path), end_on_wrong="true"
    )
    ep = env.new_episode()
    ep.reset(0)
    out = ep.step("<answer>Pelm</answer>")
    assert (out.reward, out.score, out.done) == (0.0, 0.0, True)


@pytest.mark.parametrize(
    ("which", "content", "message"),
    [
        (
            "corpus",
            '{"id": "1", "contents": "\\"T\\"\\nx"}\n{"id": 2}\n',
            r"wiki\.jsonl line 2: .*'contents'",
        ),
        (
            "corpus",
            '{"id": "1", "contents": "\\"T\\"\\nx"}\nnot json\n',
            r"wiki\.jsonl line 2: not valid JSON",
        ),
        ("corpus", "", r"wiki\.jsonl: the corpus is empty"),
        (
            "questions",
            '{"question": "q", "golden_answers": []}\n',
            r"qa\.json line 1: 'golden_answers'",
        ),
        (
            "questions",
            '{"question": "q", "golden_answers": ["a"]}\n{"golden_answers": ["a"]}\n',
            r"qa\.json line 2: missing or empty 'question'",
        ),
        (
            "questions",
            '[{"question": "q", "golden_answers": ["a"]}, 3]',
            r"qa\.json line 2: expected an object",
        ),
    ],
)
def test_bad_files_name_the_file_and_line(
    user_files: tuple[Path, Path], tmp_path: Path, which: str, content: str, message: str
) -> None:
    corpus, questions = user_files
    (corpus if which == "corpus" else questions).write_text(content)
    with pytest.raises(ValueError, match=message):
        SearchQAEnvironment(corpus=str(corpus), questions=str(questions), cache_dir=str(tmp_path))


def test_bad_options_are_value_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown retriever 'tfidf'"):
        SearchQAEnvironment(retriever="tfidf", cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="topk=0: must be >= 1"):
        SearchQAEnvironment(topk="0", cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="does not take options"):
        load_env("searchqa", colour="blue")
    with pytest.raises(ValueError, match="cannot read"):
        SearchQAEnvironment(corpus=str(tmp_path / "missing.jsonl"))
