"""SciWorld: ScienceWorld's science tasks (scienceworld 1.2.3), numbered as AgentGym numbers them.

Task ids: `data_idx` in `[0, 4639)` names (task, variation) as `tasks.TASK_LIST` lists them
(AgentGym's server numbering; out of range is refused with `bad_data_idx`).

Reset: loads the task into a simulator JVM from the pool, then plays "look around" (one move,
as AgentGym's server does). The observation is the task description, a newline, then the
look-around text: what AgentGym's client builds from its `/reset` reply (`task_description +
"\n" + observation`), so the prompt matches without the extra reply fields.
Step: the simulator's own observation text for the action, nothing added (the valid actions only
on request: `available_actions()`; the simulator's wrapper computes them, and a look, the
inventory and the task text, on every step, which is most of its per-step cost).
Actions: the simulator's text commands ("look around", "open door to kitchen", "focus on
thermometer", ...). An ambiguous action gets the simulator's numbered choice list; the answer is a
bare number. "No known action matches that input." and "Unknown action..." are flagged `invalid`.

Score and reward, as AgentGym's server serves them: `score` is the simulator's running score,
0-100 (round(100 x its 0-1 score)), -100 once the task failed (e.g. focusing on the wrong object);
`reward` is the change in score this step; `done` when the simulator says completed, when the
score went below 0 (failed), or when the moves exceed `step_limit` (100, the wrapper's default).
A completed task has score 100. Training convention (what the trainer should do, not this
server): reward = score / 100 (so failure is -1), success = completed = score >= 100; AgentGym's
client uses the raw running `score` as the reward, and partial scores (> 0 but < 100) are
progress, not success.

Env options (strings, `--env-option KEY=VALUE`): `jvms` (most simulator JVMs, i.e. most live
episodes that have been reset, default 8), `warm` (JVMs started ahead, default 2, at start-up
too), `java_opts` (default `-Xms256m -Xmx256m -XX:+UseSerialGC -XX:+AlwaysPreTouch`: ~340 MiB
resident per JVM, flat; see gateways.py), `step_limit` (default 100). A JVM is
held from reset until the episode is done, closed or reaped, then reused; one that dies fails
its episode's call (`internal`, message names the JVM) and is replaced.
"""

from __future__ import annotations

import atexit
import logging
import shutil
from typing import Any, ClassVar

from agentgym_envs.sciworld.gateways import (
    DEFAULT_JAVA_OPTS,
    Gateway,
    GatewayPool,
    JvmDied,
    PoolExhausted,
)
from agentgym_envs.sciworld.tasks import (
    NUM_TASKS,
    TASK_LIST,
    SciTask,
    check_variation_counts,
)
from agentgym_envs.sciworld.tools import SCIWORLD_TOOLS
from agentgym_envs.server.base import (
    REACT_RULES,
    EnvError,
    Environment,
    EnvOption,
    EnvUnavailable,
    Episode,
    ErrorCode,
    StepResult,
)
from agentgym_envs.server.env_options import int_option
from agentgym_envs.server.tools import Tool

log = logging.getLogger("agentgym_envs.sciworld")

INVALID_PREFIXES = ("No known action matches that input.", "Unknown action.")


class SciWorldEpisode(Episode):
    """One episode: holds a pool JVM from reset until done/close, keeps its last observation."""

    def __init__(self, env: SciWorldEnvironment) -> None:
        self._env = env
        self._gw: Gateway | None = None
        self.task: SciTask | None = None
        self._last = ""
        self._score = 0
        self._broken: str | None = None  # why this episode's JVM is gone, until the next reset
        self._description = ""
        self._look = ""

    @property
    def gateway_pid(self) -> int | None:
        """The pid of the JVM this episode holds (None when it holds none)."""
        return None if self._gw is None else self._gw.pid

    def reset(self, data_idx: int) -> StepResult:
        task = TASK_LIST[data_idx]
        if self._gw is not None and not self._gw.alive():  # died while the episode sat idle
            self._env.pool.discard(self._gw)
            self._gw = None
        if self._gw is None:
            try:
                self._gw = self._env.pool.acquire()
            except PoolExhausted as exc:
                raise EnvError(ErrorCode.INTERNAL, str(exc)) from None
        self._broken = None
        self.task = task
        self._score = 0  # the reward of the first move is its score
        self._call(lambda g: g.call("load", task.name, task.variation, "", False))
        description = str(self._call(lambda g: g.call("getTaskDescription")))
        first = self._play("look around")
        self._description, self._look = description, first.observation
        self._last = f"{description}\n{first.observation}"
        return StepResult(self._last, first.reward, first.score, first.done, False)

    def step(self, action: str) -> StepResult:
        if self._broken is not None:
            raise EnvError(ErrorCode.INTERNAL, self._broken)
        result = self._play(action)
        self._last = result.observation
        return result

    def observation(self) -> str:
        if self._broken is not None:
            raise EnvError(ErrorCode.INTERNAL, self._broken)
        return self._last

    def available_actions(self) -> list[str]:
        if self._broken is not None:
            raise EnvError(ErrorCode.INTERNAL, self._broken)
        if self._gw is None:  # done: nothing can be done any more
            return []
        return [str(a) for a in self._call(lambda g: g.call("getValidActionObjectCombinations"))]

    def close(self) -> None:
        self._release()

    def reference_reset_fields(self) -> dict[str, Any]:
        """The extra fields of AgentGym's SciWorld `/reset` reply, for a front end that speaks
        its exact dialect: there `observation` is the look-around text alone (its client
        prepends `task_description`), ours has the description in front already."""
        if self.task is None:
            raise EnvError(ErrorCode.NOT_RESET, "the episode has not been reset")
        return {
            "task_name": self.task.name,
            "var_num": self.task.variation,
            "task_description": self._description,
            "observation": self._look,
            "deleted": False,
        }

    # -- internals -------------------------------------------------------------------------------
    def _play(self, action: str) -> StepResult:
        """One simulator step as AgentGym's server reports it (see the module docs)."""
        obs = str(self._call(lambda g: g.call("step", action)))
        score = round(100 * float(self._call(lambda g: g.call("getScore"))))
        completed = bool(self._call(lambda g: g.call("getCompleted")))
        moves = int(self._call(lambda g: g.call("getNumMoves")))
        reward, self._score = score - self._score, score
        done = completed or score < 0 or moves > self._env.step_limit
        if done:
            self._release()  # the JVM serves the next episode; the observation stays here
        invalid = obs.startswith(INVALID_PREFIXES)
        return StepResult(obs, float(reward), float(score), done, invalid)

    def _call(self, fn: Any) -> Any:
        if self._gw is None:
            raise EnvError(ErrorCode.INTERNAL, "no simulator JVM held: reset the episode first")
        try:
            return fn(self._gw)
        except JvmDied as exc:
            pid = self._gw.pid
            self._env.pool.discard(self._gw)
            self._gw = None
            self._broken = (
                f"the simulator JVM of this episode (pid {pid}) died; a fresh JVM replaces it: "
                f"start a new episode ({exc})"
            )
            log.error("episode's simulator JVM pid %d died: %s", pid, exc)
            raise EnvError(ErrorCode.INTERNAL, self._broken) from None

    def _release(self) -> None:
        if self._gw is not None:
            self._env.pool.release(self._gw)
            self._gw = None


NO_JAVA = (
    "SciWorld needs a Java runtime (11 or later) on PATH and none was found: as root run "
    "'apt-get install default-jre-headless' (Debian/Ubuntu), or install any JRE "
    "(scripts/install.sh does the former when run as root)"
)


class SciWorldEnvironment(Environment):
    """ScienceWorld over a bounded pool of reused simulator JVMs (options: see module docs)."""

    name: ClassVar[str] = "sciworld"
    description: ClassVar[str] = (
        "ScienceWorld science tasks (4,639 task variations), pooled simulator JVMs"
    )
    system_prompt: ClassVar[str | None] = (
        "You are an agent in ScienceWorld, a text world for science experiments. Complete the "
        "task you are given. Actions (OBJ: an object, LOC: a place): look around, look at OBJ, "
        "look in OBJ, read OBJ, inventory, task, go to LOC, open OBJ, close OBJ, pick up OBJ, "
        "put down OBJ, move OBJ to OBJ, pour OBJ into OBJ, dunk OBJ into OBJ, mix OBJ, "
        "activate OBJ, deactivate OBJ, use OBJ, use OBJ on OBJ, connect OBJ to OBJ, disconnect "
        "OBJ, eat OBJ, flush OBJ, focus on OBJ (only on the object the task names: focusing on "
        "the wrong one fails the task), wait (10 steps), wait1 (1 step). When the world asks "
        "which object you mean, answer with the number of your choice. " + REACT_RULES
    )
    # 0-100 with partial credit for finished subgoals (-100 for a failed task): success is the
    # task completed, score 100
    score_scale: ClassVar[float] = 100.0
    success_at: ClassVar[float | None] = 1.0
    needs: ClassVar[dict[str, str]] = {
        "java": "install a Java runtime (e.g. `apt-get install default-jre-headless`)"
    }
    splits: ClassVar[dict[str, str | range]] = {
        "train": "data/train.json",
        "test": "data/test.json",
    }
    options: ClassVar[tuple[EnvOption, ...]] = (
        EnvOption("jvms", int, 8, "simulator JVMs at most (one per live episode)", minimum=1),
        EnvOption("warm", int, 2, "JVMs started before serving (at most jvms)", minimum=0),
        EnvOption("java_opts", str, " ".join(DEFAULT_JAVA_OPTS), "each JVM's options"),
        EnvOption("step_limit", int, 100, "actions per episode before it ends", minimum=1),
    )
    tools: ClassVar[tuple[Tool, ...]] = SCIWORLD_TOOLS
    http_dialect: ClassVar[str] = "sciworld"  # AgentGym's SciWorld `/reset` reply (http.py)
    blocking: ClassVar[bool] = True  # starting or loading a JVM takes seconds on a busy machine

    def __init__(
        self,
        jvms: str | int = 8,
        warm: str | int = 2,
        java_opts: str = " ".join(DEFAULT_JAVA_OPTS),
        step_limit: str | int = 100,
    ) -> None:
        if shutil.which("java") is None:
            raise EnvUnavailable(NO_JAVA)
        capacity = int_option("sciworld", "jvms", jvms, 1)
        self.step_limit = int_option("sciworld", "step_limit", step_limit, 1)
        self.pool = GatewayPool(
            capacity, min(int_option("sciworld", "warm", warm, 0), capacity), java_opts.split()
        )
        atexit.register(self.close)  # the server exits without closing its env: no JVM outlives it
        gw = self.pool.any_idle()
        if gw is not None:
            try:
                check_variation_counts(
                    [str(n) for n in gw.call("getTaskNames")],
                    lambda name: int(gw.call("getTaskMaxVariations", name)),
                )
            except Exception:
                self.close()
                raise

    def new_episode(self) -> SciWorldEpisode:
        return SciWorldEpisode(self)

    def num_tasks(self) -> int | None:
        return NUM_TASKS

    def close(self) -> None:
        """Kill every simulator JVM (idempotent)."""
        self.pool.close()

    def info(self) -> dict[str, Any]:
        return {**super().info(), "step_limit": self.step_limit, **self.pool.stats()}
