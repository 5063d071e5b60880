"""The yardsticks a policy's success is shown beside: chance and the env's scripted rule.

Contract: `yardsticks(tasks, turn_caps, env_options, cache=...)` returns, per env of `tasks`,
`{"env", "chance": {category: rate, "all": rate}, "rule": {...} | None, "rule_name": str | None,
"turn_cap", "tries"}` for each env that declares a scripted rule (`Environment.rule`): chance is
the success of the env's random valid action every turn (`Episode.random_action`), the rule that
of its scripted rule (`Episode.rule_action`), both played in this process on the same tasks and
turn cap. Envs without a rule are left out: they are the ones whose episodes are expensive to
play here (a browser, simulator JVMs); their chance alone is `python -m agentgym_envs.chance`. A policy
that reads its task closes the gap from the first to the second. They are computed once per
(env, tasks, turn cap, options, tries) and kept in the JSON file `cache` (a run folder's
`yardsticks.json`, an eval's output folder), so a resumed run or a second eval reads them back.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym_rl.env_discovery import env_traits, yardstick_rates
from agentgym_rl.episode.dataset import Task

log = logging.getLogger(__name__)
YARDSTICKS_FILE = "yardsticks.json"
CHANCE_TRIES = 10
"""Random-action episodes per task: chance over >= 10 seeds."""
RULE_TRIES = 2
"""Rule episodes per task: a rule is random only where it breaks ties."""


def yardsticks(
    tasks: Sequence[Task],
    turn_caps: Mapping[str, int],
    env_options: Mapping[str, Mapping[str, str]] | None = None,
    *,
    cache: Path | None = None,
    chance_tries: int = CHANCE_TRIES,
    rule_tries: int = RULE_TRIES,
) -> dict[str, dict[str, Any]]:
    """Each env's yardsticks on its tasks of `tasks` at its turn cap (see the module docstring);
    an env without a rule, or that cannot be played in this process, is left out."""
    stored = _read(cache)
    out: dict[str, dict[str, Any]] = {}
    for env in dict.fromkeys(t.env for t in tasks):
        if env_traits(env).rule is None:
            continue
        rows = [
            {"item_id": t.item_id, "category": t.category or "-"} for t in tasks if t.env == env
        ]
        play = _Play(env, rows, turn_caps[env], dict((env_options or {}).get(env, {})))
        key = play.key(chance_tries, rule_tries)
        if key not in stored:
            figures = play.measure(chance_tries, rule_tries)
            if figures is None:
                continue
            stored[key] = figures
            _write(cache, stored)
        out[env] = stored[key]
    return out


@dataclass(frozen=True)
class _Play:
    """One env's tasks, turn cap and options: what its yardsticks are measured on."""

    env: str
    rows: list[dict[str, str]]
    turn_cap: int
    options: dict[str, str]

    def measure(self, chance_tries: int, rule_tries: int) -> dict[str, Any] | None:
        """Chance and rule, played here; None when the env cannot be played in this process."""
        log.info(
            "measuring the yardsticks of %s on %d tasks (turn cap %d)",
            self.env,
            len(self.rows),
            self.turn_cap,
        )
        tries = {"random": chance_tries, "rule": rule_tries}
        rates = yardstick_rates(
            self.env, self.options, self.rows, turn_cap=self.turn_cap, tries=tries
        )
        if rates is None:
            return None
        return {
            "env": self.env,
            "chance": rates["random"],
            "rule": rates["rule"],
            "rule_name": env_traits(self.env).rule,
            "turn_cap": self.turn_cap,
            "tries": {"chance": chance_tries, "rule": rule_tries},
        }

    def key(self, chance_tries: int, rule_tries: int) -> str:
        """What the figures depend on, as one string (the tasks by digest)."""
        digest = hashlib.sha256(json.dumps(self.rows, sort_keys=True).encode()).hexdigest()[:16]
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.env}|{digest}|cap={self.turn_cap}|{opts}|tries={chance_tries},{rule_tries}"


def _read(cache: Path | None) -> dict[str, dict[str, Any]]:
    if cache is None:
        return {}
    try:
        stored = json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def _write(cache: Path | None, stored: dict[str, dict[str, Any]]) -> None:
    if cache is None:
        return
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps(stored, indent=1) + "\n")
    tmp.replace(cache)


__all__ = ["CHANCE_TRIES", "RULE_TRIES", "YARDSTICKS_FILE", "yardsticks"]
