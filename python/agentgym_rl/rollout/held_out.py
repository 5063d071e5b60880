"""Held-out evaluation inside a rollout server: the policy as it trains, on tasks it never sees.

Contract: `HeldOutEval.run()` watches the engine's policy version and evaluates each env's
held-out split (one per env of a mixed run), each at its own turn cap, at the version the server starts at (`at_start`: 0, or a resumed run's),
each multiple of `every_versions` and `final_version` (a version skipped by a fast learner is evaluated once, at the version
seen). Evaluation episodes go through their own `AgentLoop` (or the user's agent; same engine, env pool, chat
template and action parser as training, separate metrics) and are never sent to a learner.
Each evaluation appends one record to `<log_dir>/eval.jsonl`:
`{"version", "success" (Avg@n), "pass" (Pass@n), "reward_mean", "episodes", "by_category":
{category: Avg@n}, "by_env": {env: {"success", "pass", "reward_mean", "episodes", "turn_cap",
"by_category"}}, "versions": [lowest, highest version that generated a token], "wall_s",
"time"}` (the top-level figures are over all episodes; with one env they are that env's), and
one line per episode to `<log_dir>/eval_episodes.jsonl`: `{"version", "item_id", "category",
"sample", "success", "reward", "turns", "generated_tokens", "status"}`; with the run's
`episode_log`, each episode is also logged whole there with split `held_out` (the run viewer's
episodes and its task-across-versions view).
With `yardsticks`, chance and the env's rule on the same tasks and caps are measured once, in a
thread beside the evaluations, into `<log_dir>/yardsticks.json` (`episode/yardsticks.py`).
An evaluation holds its `hold` lock. With `hold_weights` that is the lock the weight
receiver takes before applying an update, so a record is one version's; without, the lock is a
private one, and weights may change mid-evaluation and `versions` says how far they moved. At `final_version`,
`on_final` runs first (the service stops dispatching training episodes: the learner is done),
then the final evaluation, then `run()` returns.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from agentgym_rl.config.rollout import HeldOutEvalConfig
from agentgym_rl.episode.agent import Played
from agentgym_rl.episode.dataset import Task, load_split
from agentgym_rl.episode.log import EVAL_EPISODES_FILE, EpisodeLog
from agentgym_rl.episode.outcome import is_success
from agentgym_rl.episode.scoring import ALL, EvalRecord, EvalReport, summarize
from agentgym_rl.episode.types import Engine, EpisodePlan, TurnBudget
from agentgym_rl.episode.yardsticks import YARDSTICKS_FILE, yardsticks

log = logging.getLogger(__name__)
EVAL_FILE = "eval.jsonl"


class EvalPlayer(Protocol):
    """What plays held-out episodes: the agent loop, or a user's agent behind the gateway."""

    @property
    def engine(self) -> Engine: ...

    async def play(self, plan: EpisodePlan) -> Played: ...


class HeldOutEval:
    """Periodic evaluation of the engine's current policy on a held-out split."""

    def __init__(
        self,
        config: HeldOutEvalConfig,
        agent: EvalPlayer,
        *,
        splits: dict[str, Path],
        turn_caps: dict[str, int],
        log_dir: Path,
        env_options: dict[str, dict[str, str]] | None = None,
        on_final: Callable[[], None] | None = None,
        poll_s: float = 0.5,
        hold: asyncio.Lock,
        episode_log: EpisodeLog | None = None,
    ) -> None:
        self.config = config
        self.agent = agent
        self.tasks: list[Task] = []
        for env, split in splits.items():
            tasks = load_split(split, env)
            self.tasks += tasks[: config.limit] if config.limit else tasks
        self.turn_caps = turn_caps
        self.path = Path(log_dir) / EVAL_FILE
        self.env_options = env_options or {}
        self.yardsticks: dict[str, dict[str, Any]] = {}
        self.on_final = on_final
        self.poll_s = poll_s
        self.records: list[dict[str, Any]] = []
        self.final_started = False
        self.final_done = False
        self.hold = hold
        self.episode_log = episode_log

    @property
    def version(self) -> int:
        return int(self.agent.engine.version)

    @property
    def final_due(self) -> bool:
        """The engine holds `final_version`: the final evaluation starts (or started)."""
        final = self.config.final_version
        return final is not None and self.version >= final

    def _due(self, version: int, last: int | None) -> bool:
        if last is None:  # the version this server starts at: 0, or where a resumed run is
            return self.config.at_start or version >= self.config.every_versions
        step = self.config.every_versions
        return version // step > last // step

    async def run(self) -> None:
        last: int | None = None
        sticks = asyncio.create_task(self.measure_yardsticks()) if self.config.yardsticks else None
        while True:
            version = self.version
            if self.final_due:
                self.final_started = True
                if self.on_final is not None:
                    self.on_final()
                await self.evaluate()
                if sticks is not None:
                    await sticks
                self.final_done = True
                return
            if self._due(version, last):
                await self.evaluate()
                last = version
            await asyncio.sleep(self.poll_s)

    async def measure_yardsticks(self) -> None:
        """Chance and rule on the held-out tasks (`episode/yardsticks.py`), in a thread, once
        per run: cached in `<log_dir>/yardsticks.json`. An env that cannot be played here, or
        fails, is left out with a warning: the yardsticks never stop a run."""
        cache = self.path.parent / YARDSTICKS_FILE
        try:
            self.yardsticks = await asyncio.to_thread(
                yardsticks, self.tasks, self.turn_caps, self.env_options, cache=cache
            )
        except Exception as e:
            log.warning("yardsticks not measured: %s", e)

    async def evaluate(self) -> dict[str, Any]:
        """Evaluate the current policy once (holding the weights, with `hold`); append and
        return its record."""
        async with self.hold:
            return await self._evaluate()

    async def _evaluate(self) -> dict[str, Any]:
        start_version, t0 = self.version, time.perf_counter()
        gate = asyncio.Semaphore(self.config.concurrency)
        low, high = start_version, start_version

        async def one(task: Task, k: int) -> EvalRecord:
            nonlocal low, high
            plan = EpisodePlan(
                task,
                start_version,
                TurnBudget(0, self.turn_caps[task.env]),
                f"eval-v{start_version}-{task.item_id}-s{k}",
            )
            async with gate:
                played = await self.agent.play(plan)
            if self.episode_log is not None:
                self.episode_log.record_held_out(played, plan)
            sample = played.sample
            versions = sample.versions[sample.loss_mask.astype(bool)]
            if len(versions):
                low, high = min(low, int(versions.min())), max(high, int(versions.max()))
            success = is_success(task.env, float(sample.reward), bool(sample.env_failure))
            episodes.append(
                {
                    "version": start_version,
                    "item_id": task.item_id,
                    "category": task.category,
                    "sample": k,
                    "success": success,
                    "reward": float(sample.reward),
                    "turns": int(sample.turns),
                    "generated_tokens": int(sample.loss_mask.sum()),
                    "status": sample.status,
                }
            )
            return EvalRecord(
                task.env, task.category, task.item_id, success, float(sample.reward), sample.status
            )

        n = self.config.samples_per_task
        episodes: list[dict[str, Any]] = []
        records = await asyncio.gather(*(one(t, k) for t in self.tasks for k in range(n)))
        report = summarize(records)
        envs = list(self.turn_caps)
        by_env = {env: self._figures(report, env) for env in envs}
        overall = by_env[envs[0]] if len(envs) == 1 else self._figures(report, ALL)
        record = {
            "version": start_version,
            **overall,
            "samples_per_task": n,
            "temperature": self.config.temperature,
            "by_env": by_env,
            "versions": [low, high],
            "wall_s": time.perf_counter() - t0,
            "time": time.time(),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        with (self.path.parent / EVAL_EPISODES_FILE).open("a") as f:
            f.writelines(json.dumps(e) + "\n" for e in episodes)
        self.records.append(record)
        log.info(
            "held-out eval at version %d: success %.3f over %d episodes (%.1f s)",
            start_version,
            record["success"],
            len(records),
            record["wall_s"],
        )
        return record

    def _figures(self, report: EvalReport, env: str) -> dict[str, Any]:
        """An env's (or all envs') figures of one evaluation."""
        rows = [r for r in report.rows if r.env == env]
        overall = next(r for r in rows if r.category == ALL)
        return {
            "success": overall.avg,
            "pass": overall.pass_,
            "reward_mean": overall.mean_reward,
            "episodes": overall.samples,
            "turn_cap": self.turn_caps.get(env, max(self.turn_caps.values())),
            "by_category": {r.category: r.avg for r in rows if r.category != ALL},
        }


__all__ = ["EVAL_EPISODES_FILE", "EVAL_FILE", "HeldOutEval"]
