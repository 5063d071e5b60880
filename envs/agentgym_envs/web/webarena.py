"""The WebArena task set: tasks in WebArena's config format, scored by WebArena's rules
(`evaluators.py`), on our own sites (`sites/`, served here) or on self-hosted WebArena sites.

Contract: `WebArenaTaskSet.from_options(options)` (the core's `WebArenaEnvironment` calls it;
unknown options raise ValueError). Options, all strings:
- none: our task set (`data/webarena_tasks.json`, splits `data/webarena_{train,test}.json`)
  on our shop (`__SHOPPING__`) and forum (`__REDDIT__`), started on 127.0.0.1 at build;
  `shop_port`, `forum_port` (default 0: free ports), `max_sessions`, `session_idle_s` bound
  the per-session site state.
- `tasks=PATH`: WebArena's own task configs instead (a directory of `<n>.json` or one JSON
  list, e.g. `test.raw.json`); our sites are not started and every placeholder the tasks use
  must be mapped by `url.<PLACEHOLDER>=URL` (e.g. `url.__SHOPPING__=http://host:7770`);
  `sites=shopping,reddit` keeps only tasks on those sites; `auth_dir=DIR` holds the storage
  states (`<name>.json` as `storage_state` names them) whose cookies sign a `require_login`
  task in.
- `judge_url`, `judge_model`, `judge_key_env`: an OpenAI-compatible endpoint for
  `fuzzy_match`; without one such tasks are served with `scored=False` and reported unscored.

Per episode, `prepare` sets the cookie `agentgym_session=<session>` on 127.0.0.1 (so the
episode's cart, orders and posts are its own) and signs the shop session in when the task has
`require_login`; `judge` returns `Verdict(0.0, False)` until the agent stops, then the score.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym_envs.server.env_options import int_option
from agentgym_envs.web.evaluators import (
    FuzzyJudge,
    JudgeError,
    Unscorable,
    evaluate,
    unsupported,
)
from agentgym_envs.web.taskset import TaskSet, Verdict, WebTask

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page

    from agentgym_envs.web.sites.server import Sites

DATA = Path(__file__).parent / "data"
TASKS_FILE = DATA / "webarena_tasks.json"
OPTIONS = {"tasks", "sites", "auth_dir", "shop_port", "forum_port", "max_sessions"}
OPTIONS |= {"session_idle_s", "judge_url", "judge_model", "judge_key_env"}
PLACEHOLDER = re.compile(r"__[A-Z][A-Z_]*__")
AND = " |AND| "


def load_configs(path: Path) -> list[dict[str, Any]]:
    """WebArena task configs from a directory of `<n>.json` (numeric order) or a JSON list."""
    if path.is_dir():
        files = sorted(path.glob("*.json"), key=lambda f: (not f.stem.isdigit(), _num(f.stem)))
        configs = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    else:
        loaded = json.loads(path.read_text(encoding="utf-8"))
        configs = loaded if isinstance(loaded, list) else [loaded]
    for i, config in enumerate(configs):
        if not isinstance(config, dict) or "intent" not in config or "eval" not in config:
            raise ValueError(f"{path}: entry {i} is not a WebArena task config")
    if not configs:
        raise ValueError(f"{path}: no task configs")
    return configs


def _num(stem: str) -> tuple[int, str]:
    return (int(stem), "") if stem.isdigit() else (0, stem)


def _int(options: dict[str, str], key: str, default: int) -> int:
    return int_option("webarena", key, options.get(key, default), 0)


class WebArenaTaskSet(TaskSet):
    name = "webarena"

    def __init__(
        self,
        configs: list[dict[str, Any]],
        urls: dict[str, str],
        sites: Sites | None = None,
        judge: FuzzyJudge | None = None,
        auth_dir: Path | None = None,
    ) -> None:
        self.configs = configs
        self.urls = {k: v.rstrip("/") for k, v in urls.items()}
        self.sites = sites
        self.fuzzy = judge
        self.auth_dir = auth_dir
        self.tasks = [self._make(i, c) for i, c in enumerate(configs)]

    @classmethod
    def from_options(cls, options: dict[str, str]) -> WebArenaTaskSet:
        unknown = [k for k in options if k not in OPTIONS and not k.startswith("url.")]
        if unknown:
            raise ValueError(f"unknown webarena options {unknown}; known: {sorted(OPTIONS)}, url.*")
        urls: dict[str, str] = {}
        for key, value in options.items():
            if key.startswith("url."):
                name = key[4:]
                if not PLACEHOLDER.fullmatch(name) or not value.startswith(("http://", "https://")):
                    raise ValueError(f"{key}={value!r}: want url.__NAME__=http(s)://host[:port]")
                urls[name] = value
        judge = None
        if options.get("judge_url"):
            if not options.get("judge_model"):
                raise ValueError("judge_url needs judge_model")
            judge = FuzzyJudge(
                options["judge_url"], options["judge_model"], options.get("judge_key_env")
            )
        elif options.get("judge_model") or options.get("judge_key_env"):
            raise ValueError("judge_model and judge_key_env need judge_url")
        if "tasks" in options:
            own = {"shop_port", "forum_port", "max_sessions", "session_idle_s"} & set(options)
            if own:
                raise ValueError(f"{sorted(own)} configure our own sites, not tasks=PATH")
            configs = load_configs(Path(options["tasks"]))
            if options.get("sites"):
                keep = {s.strip() for s in options["sites"].split(",") if s.strip()}
                configs = [c for c in configs if set(c.get("sites", [])) <= keep]
                if not configs:
                    raise ValueError(f"no task in {options['tasks']} is on sites {sorted(keep)}")
            used = {p for c in configs for p in PLACEHOLDER.findall(json.dumps(c))}
            missing = sorted(used - set(urls))
            if missing:
                hint = ", ".join(f"url.{m}=http://..." for m in missing)
                raise ValueError(f"the tasks use {missing}: map them with options {hint}")
            auth = Path(options["auth_dir"]) if options.get("auth_dir") else None
            return cls(configs, urls, None, judge, auth)
        if urls or options.get("sites") or options.get("auth_dir"):
            raise ValueError("url.*, sites and auth_dir apply to WebArena's own tasks (tasks=PATH)")
        from agentgym_envs.web.sites.server import Sites

        sites = Sites.start(
            shop_port=_int(options, "shop_port", 0),
            forum_port=_int(options, "forum_port", 0),
            max_sessions=_int(options, "max_sessions", 2048),
            idle_s=float(_int(options, "session_idle_s", 1800)),
        )
        try:
            return cls(load_configs(TASKS_FILE), sites.urls, sites, judge)
        except BaseException:
            sites.close()
            raise

    # -- the contract -----------------------------------------------------------------------

    def map_url(self, url: str) -> str:
        """Replace WebArena's placeholders by the mapped base URLs."""
        return PLACEHOLDER.sub(lambda m: self.urls.get(m.group(0), m.group(0)), url)

    def _make(self, index: int, config: dict[str, Any]) -> WebTask:
        reason = unsupported(config, self.fuzzy)
        category = config.get("category") or "+".join(config.get("sites", [])) or "webarena"
        start = self.map_url(str(config["start_url"]).split(AND)[0].strip())
        meta = {"config": config, "unscored_reason": reason}
        return WebTask(index, str(config["intent"]), start, category, reason is None, meta)

    def __len__(self) -> int:
        return len(self.tasks)

    def task(self, index: int) -> WebTask:
        return self.tasks[index]

    def prepare(self, task: WebTask, context: BrowserContext, session: str) -> None:
        config = task.meta["config"]
        if self.sites is not None:
            from agentgym_envs.web.sites.http import COOKIE

            self.sites.reset(session)
            cookie = {"name": COOKIE, "value": session, "domain": "127.0.0.1", "path": "/"}
            context.add_cookies([cookie])  # type: ignore[list-item]
            if config.get("require_login") and "shopping" in config.get("sites", []):
                self.sites.shop.login(session)
        elif config.get("require_login") and config.get("storage_state") and self.auth_dir:
            state = self.auth_dir / Path(str(config["storage_state"])).name
            if state.is_file():
                context.add_cookies(json.loads(state.read_text(encoding="utf-8"))["cookies"])

    def judge(self, task: WebTask, page: Page, answer: str | None) -> Verdict:
        if answer is None:
            return Verdict(0.0, False)
        if not task.scored:
            return Verdict(0.0, True, f"unscored: {task.meta['unscored_reason']}")
        try:
            outcome = evaluate(task.meta["config"], page, answer, self.map_url, self.fuzzy)
        except Unscorable as exc:
            return Verdict(0.0, True, f"unscored: {exc}")
        except JudgeError as exc:
            return Verdict(0.0, True, f"not scored, {exc}")
        return Verdict(outcome.score, True, outcome.note)

    def close(self) -> None:
        if self.sites is not None:
            self.sites.close()
            self.sites = None
