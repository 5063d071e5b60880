"""The forum (`__REDDIT__`): sub-forums of threads with replies, user profiles, search, and
posting (a reply or a new thread) as the signed-in demo user.

Contract (routes): `/` the forums and search; `/f/<forum>` its threads, newest first;
`/f/<forum>/<id>` a thread with its replies (`.reply` articles); POST `/f/<forum>/<id>/reply`
(field `body`) adds a reply and redirects back; `/f/<forum>/submit` (GET form, POST `title`,
`body`: a new thread, then its page); `/user/<name>` a profile with the user's threads;
`/search?q=` threads whose title or body contains every word. The session is always signed in
as `ForumData.me`; what it posts is the session's own (`state.py`).
"""

from __future__ import annotations

from agentgym_envs.server.asgi import Receive, Scope, Send
from agentgym_envs.web.sites.data import ForumData, Post, Thread
from agentgym_envs.web.sites.http import (
    ANY,
    POST,
    Response,
    Visit,
    esc,
    html_page,
    not_found,
    page,
    q,
    redirect,
    search_form,
    site_app,
)
from agentgym_envs.web.sites.state import ForumState, SessionStore

SITE = "Postmark Forums"
TODAY = "2025-01-15"
MAX_TEXT = 4000


class ForumApp:
    """ASGI app of the forum over `data`, with per-session state in `store`."""

    def __init__(self, data: ForumData, max_sessions: int = 2048, idle_s: float = 1800.0) -> None:
        self.data = data
        self.users = {u.name: u for u in data.users}
        self.store: SessionStore[ForumState] = SessionStore(ForumState, max_sessions, idle_s)

        self.app = site_app(
            [
                ("/", lambda v: self.home(self._state(v)), ANY),
                ("/f/{forum}", self._forum, ANY),
                ("/f/{forum}/submit", self._submit, ANY),
                ("/f/{forum}/{tid}", self._thread, ANY),
                ("/f/{forum}/{tid}/reply", self._reply, POST),
                ("/user/{name}", lambda v: self.user(self._state(v), v.params["name"]), ANY),
                ("/search", lambda v: self.search(self._state(v), v.query.get("q", "")), ANY),
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    # -- routes -----------------------------------------------------------------------------

    def _state(self, v: Visit) -> ForumState:
        return self.store.get(v.session)

    def _forum(self, v: Visit) -> Response:
        forum = v.params["forum"]
        return self.forum(self._state(v), forum) if forum in self.data.forums else not_found()

    def _submit(self, v: Visit) -> Response:
        forum = v.params["forum"]
        if forum not in self.data.forums:  # a thread named "submit" there: none
            return self.thread(self._state(v), forum, "submit")
        return self.submit(self._state(v), forum, v.method == "POST", v.form)

    def _thread(self, v: Visit) -> Response:
        posted = "Your reply was posted." if "posted" in v.query else ""
        return self.thread(self._state(v), v.params["forum"], v.params["tid"], posted)

    def _reply(self, v: Visit) -> Response:
        body = v.form.get("body", "")
        return self.reply(self._state(v), v.params["forum"], v.params["tid"], body)

    # -- helpers ----------------------------------------------------------------------------

    def _page(self, title: str, main: str, notice: str = "") -> Response:
        nav = "".join(f"<a href='/f/{f}'>f/{f}</a>" for f in self.data.forums)
        nav += f"<a href='/user/{q(self.data.me)}'>Signed in as {esc(self.data.me)}</a>"
        return html_page(page(title, main, SITE, nav, notice))

    def threads(self, state: ForumState) -> list[Thread]:
        return [*self.data.threads, *state.threads]

    def _find(self, state: ForumState, forum: str, tid: str) -> Thread | None:
        return next((t for t in self.threads(state) if str(t.id) == tid and t.forum == forum), None)

    def _replies(self, state: ForumState, t: Thread) -> list[Post]:
        return [*t.replies, *state.replies.get(t.id, [])]

    def _thread_list(self, state: ForumState, threads: list[Thread]) -> str:
        if not threads:
            return "<p>No threads found.</p>"
        items = "".join(
            f"<li><article><h2><a href='/f/{t.forum}/{t.id}'>{esc(t.title)}</a></h2>"
            f"<p>Submitted on {t.date} by <a href='/user/{q(t.author)}'>{esc(t.author)}</a> "
            f"in <a href='/f/{t.forum}'>f/{t.forum}</a> - "
            f"{len(self._replies(state, t))} comments</p>"
            f"<p class='snippet'>{esc(t.body[:120])}</p></article></li>"
            for t in threads
        )
        return f"<ul>{items}</ul>"

    # -- pages ------------------------------------------------------------------------------

    def home(self, state: ForumState) -> Response:
        rows = "".join(
            f"<tr><td><a href='/f/{f}'>f/{f}</a></td><td>{esc(desc)}</td>"
            f"<td>{sum(1 for t in self.threads(state) if t.forum == f)}</td></tr>"
            for f, desc in self.data.forums.items()
        )
        main = (
            f"<h1>{SITE}</h1>{search_form(label='Search threads')}<h2>Forums</h2>"
            "<table><thead><tr><th>Forum</th><th>Description</th><th>Threads</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
        return self._page("Forums", main)

    def forum(self, state: ForumState, forum: str, notice: str = "") -> Response:
        threads = [t for t in self.threads(state) if t.forum == forum]
        threads.sort(key=lambda t: (t.date, t.id), reverse=True)
        main = (
            f"<h1>f/{forum}</h1><p>{esc(self.data.forums[forum])}</p>"
            f"<p><a href='/f/{forum}/submit'>Submit a new thread</a></p>"
            + self._thread_list(state, threads)
        )
        return self._page(f"f/{forum}", main, notice)

    def thread(self, state: ForumState, forum: str, tid: str, notice: str = "") -> Response:
        t = self._find(state, forum, tid)
        if t is None:
            return not_found("No such thread")
        replies = self._replies(state, t)
        items = "".join(
            f"<article class='reply'><p>Reply by <a class='author' href='/user/{q(p.author)}'>"
            f"{esc(p.author)}</a> on {p.date}</p><p class='body'>{esc(p.body)}</p></article>"
            for p in replies
        )
        main = (
            f"<article id='thread'><h1>{esc(t.title)}</h1>"
            f"<p>Submitted on {t.date} by <a class='author' href='/user/{q(t.author)}'>"
            f"{esc(t.author)}</a> in <a href='/f/{t.forum}'>f/{t.forum}</a></p>"
            f"<p class='thread-body'>{esc(t.body)}</p></article>"
            f"<section aria-label='Comments'><h2>{len(replies)} comments</h2>{items}</section>"
            f"<form method='post' action='/f/{forum}/{t.id}/reply'>"
            "<p><label for='reply-body'>Your reply</label></p>"
            "<textarea id='reply-body' name='body' rows='4' cols='60'></textarea>"
            "<p><button type='submit'>Post Reply</button></p></form>"
        )
        return self._page(t.title, main, notice)

    def reply(self, state: ForumState, forum: str, tid: str, body: str) -> Response:
        t = self._find(state, forum, tid)
        if t is None:
            return not_found("No such thread")
        body = body.strip()[:MAX_TEXT]
        if not body:
            return self.thread(state, forum, tid, "A reply cannot be empty.")
        state.replies.setdefault(t.id, []).append(Post(self.data.me, body, TODAY))
        return redirect(f"/f/{forum}/{t.id}?posted=1")

    def submit(self, state: ForumState, forum: str, post: bool, form: dict[str, str]) -> Response:
        notice = ""
        if post:
            title = form.get("title", "").strip()[:300]
            body = form.get("body", "").strip()[:MAX_TEXT]
            if title and body:
                tid = len(self.threads(state)) + 1
                state.threads.append(Thread(tid, forum, title, self.data.me, body, TODAY, ()))
                return redirect(f"/f/{forum}/{tid}")
            notice = "A thread needs a title and a body."
        main = (
            f"<h1>Submit a new thread to f/{forum}</h1>"
            f"<form method='post' action='/f/{forum}/submit'>"
            "<p><label for='title'>Title</label> <input id='title' name='title' size='60'></p>"
            "<p><label for='body'>Body</label></p>"
            "<textarea id='body' name='body' rows='6' cols='60'></textarea>"
            "<p><button type='submit'>Create Thread</button></p></form>"
        )
        return self._page(f"Submit to f/{forum}", main, notice)

    def user(self, state: ForumState, name: str) -> Response:
        u = self.users.get(name)
        if u is None:
            return not_found("No such user")
        threads = [t for t in self.threads(state) if t.author == name]
        n_replies = sum(
            1 for t in self.threads(state) for p in self._replies(state, t) if p.author == name
        )
        main = (
            f"<h1>{esc(u.name)}</h1><dl><dt>Joined</dt><dd>{u.joined}</dd>"
            f"<dt>About</dt><dd>{esc(u.bio)}</dd><dt>Threads</dt><dd>{len(threads)}</dd>"
            f"<dt>Comments</dt><dd>{n_replies}</dd></dl>"
            f"<h2>Threads by {esc(u.name)}</h2>" + self._thread_list(state, threads)
        )
        return self._page(u.name, main)

    def search(self, state: ForumState, text: str) -> Response:
        words = text.lower().split()
        found = [
            t
            for t in self.threads(state)
            if words and all(w in f"{t.title} {t.body}".lower() for w in words)
        ]
        main = (
            f"<h1>Search results for '{esc(text)}'</h1>{search_form(text, 'Search threads')}"
            f"<p>{len(found)} results</p>" + self._thread_list(state, found)
        )
        return self._page(f"Search: {text}", main)
