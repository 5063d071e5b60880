"""The forum's tasks, read off its generated data: `info` (string_match), `nav` (url_match)
and `action` (program_html: a reply on the thread's page, a new thread in the forum's list),
acting as the signed-in demo user.

Contract: `forum_tasks(forum, rng)` is pure given the rng's state.
"""

from __future__ import annotations

import random

from agentgym_envs.web.sites.data import ForumData
from agentgym_envs.web.sites.task_config import FORUM, Task, answer, html, task, url

REPLY_OPENERS = ["Thanks for posting this", "Great question", "I had the same thought"]
REPLY_OPENERS += ["Nice one", "Interesting point", "Count me in"]
REPLY_TAILS = ["see you at the next meetup", "I will try it this weekend", "more photos please"]
REPLY_TAILS += ["saving this thread", "my notes are in my profile", "cheers from the coast"]


def forum_tasks(forum: ForumData, rng: random.Random) -> list[Task]:
    out: list[Task] = []
    threads = forum.threads
    for t in rng.sample(threads, 15):
        out.append(
            task(
                "forum/info",
                "Who posted the thread titled '{title}'?",
                {"title": t.title},
                answer(t.author),
                FORUM,
            )
        )
    for t in rng.sample(threads, 10):
        out.append(
            task(
                "forum/info",
                "How many comments does the thread '{title}' have?",
                {"title": t.title},
                answer(str(len(t.replies))),
                FORUM,
            )
        )
    for t in rng.sample(threads, 8):
        out.append(
            task(
                "forum/info",
                "In which forum was the thread '{title}' posted?",
                {"title": t.title},
                answer(t.forum),
                FORUM,
            )
        )
    for u in rng.sample(forum.users, 8):
        out.append(
            task(
                "forum/info",
                "On which date (YYYY-MM-DD) did the user {user} join?",
                {"user": u.name},
                answer(u.joined),
                FORUM,
            )
        )
    authors = sorted({t.author for t in threads})
    for name in rng.sample(authors, 8):
        n = sum(1 for t in threads if t.author == name)
        out.append(
            task(
                "forum/info",
                "How many threads has the user {user} started?",
                {"user": name},
                answer(str(n)),
                FORUM,
            )
        )
    for name in forum.forums:
        newest = sorted((t for t in threads if t.forum == name), key=lambda t: t.date)
        if newest[-1].date != newest[-2].date:
            out.append(
                task(
                    "forum/info",
                    "What is the title of the newest thread in f/{forum}?",
                    {"forum": name},
                    answer(newest[-1].title),
                    FORUM,
                )
            )
    for t in rng.sample([t for t in threads if t.replies], 8):
        out.append(
            task(
                "forum/info",
                "Who wrote the first comment on the thread '{title}'?",
                {"title": t.title},
                answer(t.replies[0].author),
                FORUM,
            )
        )
    # navigation
    for u in rng.sample(forum.users, 10):
        out.append(
            task(
                "forum/nav",
                "Go to the profile page of the user {user}.",
                {"user": u.name},
                url(f"{FORUM}/user/{u.name}"),
                FORUM,
            )
        )
    for t in rng.sample(threads, 10):
        out.append(
            task(
                "forum/nav",
                "Open the thread titled '{title}'.",
                {"title": t.title},
                url(f"{FORUM}/f/{t.forum}/{t.id}"),
                FORUM,
            )
        )
    for name in forum.forums:
        out.append(
            task(
                "forum/nav",
                "Go to the f/{forum} forum.",
                {"forum": name},
                url(f"{FORUM}/f/{name}"),
                FORUM,
            )
        )
    for word in ("advice", "opinion", "story", "weekly"):
        out.append(
            task(
                "forum/nav",
                "Search the forum for '{term}'.",
                {"term": word},
                url(f"{FORUM}/search?q={word}"),
                FORUM,
            )
        )
    # actions, as the signed-in demo user
    bodies = "[...document.querySelectorAll('.reply .body')].map(e => e.textContent).join('\\n')"
    for i, t in enumerate(rng.sample(threads, 16)):
        text = f"{rng.choice(REPLY_OPENERS)}, {rng.choice(REPLY_TAILS)} (#{i + 1})"
        target = (f"{FORUM}/f/{t.forum}/{t.id}", bodies, {"must_include": [text]})
        out.append(
            task(
                "forum/action",
                "Reply to the thread '{title}' with the text: {text}",
                {"title": t.title, "text": text},
                html(target),
                FORUM,
            )
        )
    listing = "[...document.querySelectorAll('main article')].map(e => e.textContent).join('\\n')"
    names = list(forum.forums)
    for i in range(10):
        name = names[i % len(names)]
        title = f"{rng.choice(REPLY_OPENERS)}: notes from {forum.me} no. {i + 1}"
        body = f"{rng.choice(REPLY_TAILS).capitalize()}."
        target = (f"{FORUM}/f/{name}", listing, {"must_include": [title, body]})
        out.append(
            task(
                "forum/action",
                "Create a new thread in f/{forum} with the title '{title}' and the body '{body}'.",
                {"forum": name, "title": title, "body": body},
                html(target),
                FORUM,
            )
        )
    return out
