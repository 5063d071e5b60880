"""Deep Search (SearchQA, Search-R1 format): answer a question by searching a passage corpus.

Task `data_idx` is question `data_idx` of the question file (default: the generated
data/questions.jsonl). Reset shows the instruction and `Question: ...`. Actions (the first tag
wins, as in AgentGym's server):
- `<search>query</search>` -> `<information>Doc 1(Title: ...) text\nDoc 2(...) ...</information>`,
  the top `topk` passages, each cut to `passage_words` words (0: whole);
- `<answer>text</answer>` -> exact match against the golden answers (scoring.py): correct is
  reward 1, score 1, done; wrong is reward 0 and the episode goes on (`end_on_wrong=true`
  ends it instead);
- anything else -> a format hint, `invalid`.
`observation()` is the reset prompt, as AgentGym's SearchQA server answers `/observation`.

Options (strings from `--env-option KEY=VALUE`): retriever=bm25|dense, topk=3,
passage_words=0, end_on_wrong=false, prompt=full|question, corpus=PATH, questions=PATH,
cache_dir=PATH (default $AGENTGYM_SEARCHQA_CACHE or ~/.cache/agentgym-envs/searchqa).
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from agentgym_envs.searchqa.datafiles import QA, Doc, load_corpus, load_questions
from agentgym_envs.searchqa.entities import EntityIndex, random_answer, random_search
from agentgym_envs.searchqa.retrieval import build_retriever
from agentgym_envs.searchqa.scoring import exact_match, parse_action
from agentgym_envs.server.base import Environment, EnvOption, Episode, StepResult
from agentgym_envs.server.env_options import flag_option, int_option
from agentgym_envs.server.tools import Param, Tool

log = logging.getLogger("agentgym_envs.searchqa")

DATA = Path(__file__).parent / "data"
INSTRUCTION = (
    "Answer the question below. Think it through, and whenever you are missing a fact, search "
    "for it by writing <search> query </search>: the results come back between <information> "
    "and </information>. Search as often as you need. When you know the answer, give it "
    "between <answer> and </answer>, short and without explanation, e.g. <answer> Paris "
    "</answer>."
)
HINT = (
    "Invalid action. Search with <search> query </search> or give the final answer with "
    "<answer> answer </answer>."
)
CORRECT = "Correct: your answer matches the expected one."
WRONG = "Your answer is incorrect. Search for more information or try another answer."
WRONG_FINAL = "Your answer is incorrect. The episode is over."
ACTIONS = ["<search> query </search>", "<answer> answer </answer>"]


class SearchQAEpisode(Episode):
    """One question: the prompt, the golden answers, the running score."""

    def __init__(self, env: SearchQAEnvironment) -> None:
        self._env = env
        self._qa: QA | None = None
        self._prompt = ""
        self._score = 0.0
        self._retrieved: list[int] = []  # passages shown so far (for `random_action`)
        self._hits: list[int] = []  # the last search's passages, best first (`rule_action`)
        self._answered: set[str] = set()  # answers tried (`rule_action`)

    def reset(self, data_idx: int) -> StepResult:
        self._qa = self._env.questions[data_idx]
        self._prompt = self._env.prompt_for(self._qa)
        self._score = 0.0
        self._retrieved, self._hits, self._answered = [], [], set()
        return StepResult(self._prompt)

    def step(self, action: str) -> StepResult:
        assert self._qa is not None  # the table refuses steps before reset
        parsed = parse_action(action)
        if parsed is None:
            return StepResult(HINT, 0.0, self._score, False, invalid=True)
        tag, content = parsed
        if tag == "answer":
            self._answered.add(content.strip())
        if tag == "search":
            hits = self._env.search(content)
            self._retrieved += hits
            self._hits = hits
            return StepResult(self._env.information(hits), 0.0, self._score)
        if exact_match(content, self._qa.golden_answers):
            self._score = 1.0
            return StepResult(CORRECT, 1.0, 1.0, True)
        if self._env.end_on_wrong:
            return StepResult(WRONG_FINAL, 0.0, self._score, True)
        return StepResult(WRONG, 0.0, self._score)

    def observation(self) -> str:
        return self._prompt

    def available_actions(self) -> list[str]:
        return list(ACTIONS)

    def rule_action(self, rng: random.Random) -> str | None:
        """First a search for the whole question; then, in turn, each entity the top passage of
        the last search mentions that the question does not and no answer tried yet."""
        assert self._qa is not None
        if not self._hits:
            return f"<search> {self._qa.question} </search>"
        asked = set(self._env.entities_in_text(self._qa.question))
        for name in self._env.entities_in(self._hits[:1]):
            if name not in asked and name not in self._answered:
                return f"<answer> {name} </answer>"
        return f"<search> {self._qa.question} </search>"

    def random_action(self, rng: random.Random) -> str | None:
        """A search for a run of 1-6 of the question's words; once passages were shown, as
        likely an answer naming one of the entities they mention."""
        assert self._qa is not None
        seen = self._env.entities_in(self._retrieved)
        if seen and rng.random() < 0.5:
            return random_answer(seen, rng)
        return random_search(self._qa.question, rng)


class SearchQAEnvironment(Environment):
    """Questions `[0, len(questions))` over one corpus and one shared retriever."""

    name: ClassVar[str] = "searchqa"
    http_dialect: ClassVar[str] = "searchqa"
    rule: ClassVar[str | None] = "search the question, then answer the top passage's entities"
    description: ClassVar[str] = (
        "Deep Search (Search-R1 format): search a passage corpus (bm25 or dense), answer by "
        "exact match; generated 1-3-hop questions"
    )
    action_format: ClassVar[str] = "tags"  # its prompt: the generic one of the tags format
    # Spaced inside the tags as the instruction and `random_action` write them
    tools: ClassVar[tuple[Tool, ...]] = (
        Tool(
            "search",
            "Search the passage corpus; the top passages come back between <information> and "
            "</information>. Search as often as you need.",
            "<search> {query} </search>",
            (Param("query", "string", "What to search for, e.g. a name and the fact missing."),),
        ),
        Tool(
            "answer",
            "Give the final answer: short, without explanation (checked by exact match).",
            "<answer> {answer} </answer>",
            (Param("answer", "string", "The answer, e.g. 'Paris'."),),
        ),
    )
    splits: ClassVar[dict[str, str | range]] = {
        "train": "data/train.json",
        "test": "data/test.json",
        "train_1hop": "data/train_1hop.json",
        "test_1hop": "data/test_1hop.json",
    }
    options: ClassVar[tuple[EnvOption, ...]] = (
        EnvOption("retriever", str, "bm25", "passage retrieval", choices=("bm25", "dense")),
        EnvOption("topk", int, 3, "passages a search returns", minimum=1),
        EnvOption("passage_words", int, 0, "cut passages to this many words (0: whole)", minimum=0),
        EnvOption("end_on_wrong", bool, False, "a wrong answer ends the episode"),
        EnvOption("prompt", str, "full", "the reset observation", choices=("full", "question")),
        EnvOption("corpus", str, None, "a passage corpus JSONL (default: the generated one)"),
        EnvOption("questions", str, None, "a questions JSONL (default: the generated ones)"),
        EnvOption("cache_dir", str, None, "where retrieval indexes are cached"),
    )

    def __init__(
        self,
        retriever: str = "bm25",
        topk: str | int = 3,
        passage_words: str | int = 0,
        end_on_wrong: str | bool = False,
        prompt: str = "full",
        corpus: str | None = None,
        questions: str | None = None,
        cache_dir: str | None = None,
    ) -> None:
        self.topk = int_option("searchqa", "topk", topk, 1)
        self.passage_words = int_option("searchqa", "passage_words", passage_words, 0)
        self.end_on_wrong = flag_option("searchqa", "end_on_wrong", end_on_wrong)
        if prompt not in ("full", "question"):
            raise ValueError(f"searchqa option prompt={prompt!r}: expected full or question")
        self.prompt = prompt
        self.corpus_path = Path(corpus) if corpus else DATA / "corpus.jsonl"
        self.questions_path = Path(questions) if questions else DATA / "questions.jsonl"
        self.docs: list[Doc] = load_corpus(self.corpus_path)
        self.questions: list[QA] = load_questions(self.questions_path)
        self.retriever = build_retriever(
            retriever, [d.contents for d in self.docs], Path(cache_dir) if cache_dir else None
        )
        # Search results computed for a whole ZMQ batch at once (`prefetch`), by query.
        self._prefetched: dict[str, list[int]] = {}

    # -- the Environment interface -------------------------------------------------------------
    def new_episode(self) -> SearchQAEpisode:
        return SearchQAEpisode(self)

    def num_tasks(self) -> int | None:
        return len(self.questions)

    def prefetch(self, actions: list[str]) -> None:
        """Run the searches of a batch of step actions as one batched retrieval; the steps that
        follow read their results from here. A new call replaces the previous results."""
        queries = list(
            dict.fromkeys(p[1] for a in actions if (p := parse_action(a)) and p[0] == "search")
        )
        self._prefetched = (
            dict(zip(queries, self.retriever.search_many(queries, self.topk), strict=True))
            if len(queries) > 1
            else {}
        )

    def reference_text(self) -> Iterable[str]:
        return (d.contents for d in self.docs)

    def info(self) -> dict[str, Any]:
        categories = Counter(q.category for q in self.questions)
        return {
            **super().info(),
            "categories": dict(sorted(categories.items())),
            "passages": len(self.docs),
            "retriever": self.retriever.kind,
            "topk": self.topk,
            "passage_words": self.passage_words,
        }

    # -- episodes' helpers ---------------------------------------------------------------------
    def prompt_for(self, qa: QA) -> str:
        question = f"Question: {qa.question}"
        return question if self.prompt == "question" else f"{INSTRUCTION}\n\n{question}"

    def search(self, query: str) -> list[int]:
        """The top `topk` passages for `query` (from the batch's prefetch when there is one)."""
        hits = self._prefetched.get(query)
        return list(hits) if hits is not None else list(self.retriever.search(query, self.topk))

    def information(self, hits: list[int]) -> str:
        lines = [
            f"Doc {n}(Title: {self.docs[i].title}) {self._cut(self.docs[i].text)}"
            for n, i in enumerate(hits, 1)
        ]
        return "<information>" + "\n".join(lines) + "</information>"

    @cached_property
    def entity_index(self) -> EntityIndex:
        """Every passage title as an entity name (built on first use: only random actions and
        the tests need it)."""
        return EntityIndex(d.title for d in self.docs)

    def entities_in_text(self, text: str) -> list[str]:
        """The entities `text` mentions, in order."""
        return list(dict.fromkeys(self.entity_index.mentions(text)))

    def entities_in(self, hits: list[int]) -> list[str]:
        """The entities the shown part of these passages mention (titles included), in order."""
        names: dict[str, None] = {}
        for i in hits:
            text = f"{self.docs[i].title} {self._cut(self.docs[i].text)}"
            names.update(dict.fromkeys(self.entity_index.mentions(text)))
        return list(names)

    def _cut(self, text: str) -> str:
        if not self.passage_words:
            return text
        words = text.split()
        return text if len(words) <= self.passage_words else " ".join(words[: self.passage_words])
