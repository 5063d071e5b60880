"""WebArena's evaluation rules, re-implemented: `string_match`, `url_match`, `program_html`
and `fuzzy_match` through an optional OpenAI-compatible judge.

Contract (the rules, as WebArena's evaluation harness defines them):
- An answer is cleaned by stripping whitespace, then one pair of matching surrounding quotes,
  then lowercasing; `exact_match` compares cleaned reference and answer; `must_include` needs
  every listed item in the answer (a one-item list whose item is one character is matched
  against the answer's word tokens, so "0" is not found in "10"); `fuzzy_match` asks the judge
  per reference (`"N/A"`: an exact "n/a", else the judge with the config's `string_note`).
- `url_match`: the current URL and each reference (alternatives split by ` |OR| `) lose a
  trailing `/`; some reference's host+path must be a substring of the current one's, and for
  every query key of the references one of their values must be among the current URL's.
- `program_html`: per target, load `url` unless it is `last` (the current page), take the
  page's HTML (empty locator) or the string of the locator's JS value (`document.`...; an error
  gives ""), HTML-unescape it, and require `required_contents`: `exact_match` (cleaned
  equality) or every `must_include` item (each with ` |OR| ` alternatives) as a substring.
- `eval_types` multiply. `func:` URLs and locators call WebArena's own site APIs and are not
  supported here: such a config is unscored (`unsupported` says why), as is `fuzzy_match`
  without a judge; an unscored task is never guessed.
"""

from __future__ import annotations

import html
import json
import os
import re
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

if TYPE_CHECKING:
    from playwright.sync_api import Page

OR = " |OR| "
_TOKEN = re.compile(r"\w+|[^\w\s]")


class Unscorable(Exception):
    """The config cannot be scored here (the message says why)."""


class JudgeError(Exception):
    """The judge endpoint failed or answered something unreadable."""


def clean_answer(answer: str) -> str:
    answer = answer.strip()
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "'\"":
        answer = answer[1:-1]
    return answer.lower()


def exact_match(ref: str, pred: str) -> float:
    return float(clean_answer(pred) == clean_answer(ref))


def must_include(ref: str, pred: str, tokenize: bool = False) -> float:
    ref, pred = clean_answer(ref), clean_answer(pred)
    if tokenize and len(ref) == 1:
        return float(ref in _TOKEN.findall(pred))
    return float(ref in pred)


# -- the judge (fuzzy_match) ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FuzzyJudge:
    """An OpenAI-compatible chat endpoint that grades an answer against a reference."""

    url: str
    """Base URL (`http://host:8000/v1`) or the full `.../chat/completions` URL."""
    model: str
    key_env: str | None = None
    """Name of the environment variable holding the API key (never the key itself)."""
    timeout_s: float = 60.0

    def ask(self, prompt: str) -> str:
        url = self.url if self.url.endswith("/chat/completions") else self.url.rstrip("/")
        if not url.endswith("/chat/completions"):
            url += "/chat/completions"
        body = {
            "model": self.model,
            "temperature": 0,
            "max_tokens": 64,
            "messages": [
                {"role": "system", "content": "You grade answers. Reply with one word."},
                {"role": "user", "content": prompt},
            ],
        }
        headers = {"content-type": "application/json"}
        key = os.environ.get(self.key_env, "") if self.key_env else ""
        if key:
            headers["authorization"] = f"Bearer {key}"
        request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                content = json.load(reply)["choices"][0]["message"]["content"]
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise JudgeError(f"judge at {url} failed: {exc!r}") from exc
        return str(content)

    def grade(self, intent: str, reference: str, answer: str) -> float:
        if not answer:
            return float(not reference)
        verdict = self.ask(
            f"Task: {intent}\nReference answer: {reference}\nGiven answer: {answer}\n"
            "Does the given answer mean the same as the reference answer (extra detail is "
            "fine, anything missing or contradicting is not)? Reply 'correct', 'incorrect' or "
            "'partially correct'."
        ).lower()
        return float(
            "correct" in verdict and "incorrect" not in verdict and "partial" not in verdict
        )

    def grade_unachievable(self, intent: str, reason: str, answer: str) -> float:
        verdict = self.ask(
            f"Task: {intent}\nThe task cannot be done, because: {reason}\nGiven answer: "
            f"{answer}\nDoes the given answer report that the task cannot be done for this "
            "reason? Reply 'same' or 'different'."
        ).lower()
        return float("same" in verdict and "different" not in verdict)


# -- the rules on plain strings -------------------------------------------------------------


def string_match(config: dict[str, Any], answer: str, judge: FuzzyJudge | None) -> float:
    pred = clean_answer(answer)
    score = 1.0
    for approach, value in config["eval"]["reference_answers"].items():
        if approach == "exact_match":
            score *= exact_match(str(value), pred)
        elif approach == "must_include":
            items = [str(v) for v in value]
            for item in items:
                score *= must_include(item, pred, tokenize=len(items) == 1)
        elif approach == "fuzzy_match":
            if judge is None:
                raise Unscorable("fuzzy_match needs a judge endpoint (judge_url)")
            intent = config.get("intent", "")
            if value == "N/A":
                score *= exact_match("N/A", pred)
                if score != 1:
                    note = config["eval"].get("string_note", "")
                    score = judge.grade_unachievable(intent, note, pred)
            else:
                for reference in value:
                    score *= judge.grade(intent, str(reference), pred)
        else:
            raise Unscorable(f"unknown reference_answers kind {approach!r}")
    return score


def _base_and_query(url: str) -> tuple[str, dict[str, list[str]]]:
    parsed = urlparse(url.rstrip("/"))
    return (parsed.netloc + parsed.path).rstrip("/"), parse_qs(parsed.query)


def url_match(reference_url: str, current_url: str, rule: str = "GOLD in PRED") -> float:
    if rule != "GOLD in PRED":
        raise Unscorable(f"unknown url_note {rule!r}")
    pred_base, pred_query = _base_and_query(current_url)
    bases: list[str] = []
    queries: dict[str, set[str]] = defaultdict(set)
    for ref in reference_url.split(OR):
        base, query = _base_and_query(ref)
        bases.append(base)
        for key, found in query.items():
            queries[key].update(found)
    score = float(any(base in pred_base for base in bases))
    for key, wanted in queries.items():
        score *= float(any(v in pred_query.get(key, []) for v in wanted))
    return score


def contents_match(required: dict[str, Any], selected: str) -> float:
    """One program_html target's `required_contents` against the selected text."""
    if "exact_match" in required:
        return exact_match(str(required["exact_match"]), selected)
    if "must_include" in required:
        score = 1.0
        for item in required["must_include"]:
            score *= float(any(must_include(alt, selected) for alt in str(item).split(OR)))
        return score
    raise Unscorable(f"unknown required_contents {sorted(required)}")


# -- the rules on a page --------------------------------------------------------------------


def select(page: Page, target: dict[str, Any], map_url: Callable[[str], str]) -> str:
    """Load the target's page and return the text its locator selects (HTML-unescaped)."""
    url, locator = str(target["url"]), str(target.get("locator", ""))
    if url.startswith("func:") or locator.startswith("func:"):
        raise Unscorable("program_html func: helpers call WebArena's site APIs")
    if url != "last":
        page.goto(map_url(url), wait_until="load")
    else:  # the last action may have started a navigation
        page.wait_for_load_state("load")
    if not locator.strip():
        selected = page.content()
    elif locator.startswith(("document.", "[...document.")):
        for prep in target.get("prep_actions", []):
            try:
                page.evaluate(f"() => {prep}")
            except Exception:  # WebArena ignores failing preparation steps
                break
        try:
            selected = str(page.evaluate(f"() => {locator}")) or ""
        except Exception:  # the element is not there: nothing selected
            selected = ""
    else:
        raise Unscorable(f"unknown locator {locator[:40]!r}")
    return html.unescape(selected)


def unsupported(config: dict[str, Any], judge: FuzzyJudge | None) -> str | None:
    """Why the config cannot be scored here, or None when it can."""
    ev = config.get("eval", {})
    for kind in ev.get("eval_types", []):
        if kind not in ("string_match", "url_match", "program_html"):
            return f"unknown eval_type {kind!r}"
    if "string_match" in ev.get("eval_types", []):
        if "fuzzy_match" in ev.get("reference_answers", {}) and judge is None:
            return "fuzzy_match needs a judge endpoint (judge_url)"
    if "program_html" in ev.get("eval_types", []):
        for target in ev.get("program_html", []):
            if str(target.get("url", "")).startswith("func:"):
                return "program_html func: URL (WebArena's site API helpers)"
            if str(target.get("locator", "")).startswith("func:"):
                return "program_html func: locator (WebArena's site API helpers)"
    if ev.get("url_note", "GOLD in PRED") != "GOLD in PRED":
        return f"unknown url_note {ev['url_note']!r}"
    return None


@dataclass(frozen=True, slots=True)
class Outcome:
    score: float
    note: str


def evaluate(
    config: dict[str, Any],
    page: Page,
    answer: str,
    map_url: Callable[[str], str],
    judge: FuzzyJudge | None = None,
) -> Outcome:
    """Score a stopped episode: the product of the config's evaluators (0 or 1)."""
    ev = config["eval"]
    score = 1.0
    failed: list[str] = []
    for kind in ev["eval_types"]:
        if kind == "string_match":
            part = string_match(config, answer, judge)
        elif kind == "url_match":
            part = url_match(
                map_url(ev["reference_url"]), page.url, ev.get("url_note", "GOLD in PRED")
            )
        elif kind == "program_html":
            part = 1.0
            for target in ev["program_html"]:
                part *= contents_match(target["required_contents"], select(page, target, map_url))
        else:
            raise Unscorable(f"unknown eval_type {kind!r}")
        if part < 1.0:
            failed.append(kind)
        score *= part
    note = "success" if score >= 1.0 else "failed: " + ", ".join(failed)
    return Outcome(score, note)
