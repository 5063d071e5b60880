"""Task-config builders shared by the shop's and the forum's task generators
(`shop_tasks.py`, `forum_tasks.py`): one WebArena config per call, with our `category`.

Contract: every builder is pure; `make_tasks.py` numbers the tasks and writes them.
"""

from __future__ import annotations

from typing import Any

SHOP, FORUM = "__SHOPPING__", "__REDDIT__"
LOGIN = " (you are signed in as the shop's customer)"

Task = dict[str, Any]


def task(
    category: str,
    intent_template: str,
    values: dict[str, Any],
    evaluation: dict[str, Any],
    start_url: str,
    login: bool = False,
) -> Task:
    site = "shopping" if category.startswith("shop") else "reddit"
    ev: dict[str, Any] = {
        "eval_types": [],
        "reference_answers": None,
        "reference_url": "",
        "program_html": [],
    }
    ev |= evaluation
    return {
        "sites": [site],
        "task_id": -1,
        "require_login": login,
        "storage_state": None,
        "start_url": start_url,
        "geolocation": None,
        "intent_template": intent_template,
        "instantiation_dict": values,
        "intent": intent_template.format(**values),
        "require_reset": "action" in category,
        "eval": ev,
        "category": category,
    }


def answer(*items: str) -> dict[str, Any]:
    return {"eval_types": ["string_match"], "reference_answers": {"must_include": list(items)}}


def url(url: str) -> dict[str, Any]:
    return {"eval_types": ["url_match"], "reference_url": url, "url_note": "GOLD in PRED"}


def html(*targets: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    rows = [{"url": u, "locator": loc, "required_contents": req} for u, loc, req in targets]
    return {"eval_types": ["program_html"], "program_html": rows}
