"""A child process started by a Ray actor on the node Ray placed it on, supervised from the driver.

Contract: `ProcessActor` is a plain class; the launcher makes it an actor where it uses it,
`ray.remote(num_cpus=0, ...)(ProcessActor).options(name=..., resources=...).remote()`, so this
module imports without Ray. The actor only launches and watches: `start(argv, env, log_path)`
runs `argv` in a new session with stdout and stderr appended to `log_path` (on the actor's
node), in the actor's environment (the node's, with the devices Ray gave the actor:
`CUDA_VISIBLE_DEVICES` for `num_gpus`) updated with `env`; the child gets SIGTERM when the actor
process dies (PR_SET_PDEATHSIG, `die_with_parent`), so a killed actor or a stopped Ray job
leaves no process behind. The signal follows the thread that started the child: keep the
actor's default `max_concurrency=1` (its methods run on the worker's main thread), never a
threaded or async actor. `poll()`, `wait(timeout_s)`, `terminate()` (SIGTERM to the
child), `kill_group()` (SIGKILL to its process group), `tail(n)` and `pid()` act on the child
of the last `start`. The processes of a run talk over their own sockets, never through Ray.

`RayChild(spec, log_dir, env, actor)` is the driver's side: the interface of
`agentgym_rl.processes.child.Child` (a `Launched`) over an actor handle, every call a
`ray.get` with a deadline. `env` is the run's environment as the supervisor builds it on the
driver; the driver's own Ray variables (`RAY_*`) and device list (`CUDA_VISIBLE_DEVICES`) are
left out, so the child keeps its node's and the devices Ray assigned, unless `spec.env` sets
them. A child whose actor died (its node lost, the actor killed) counts as exited with
`ACTOR_LOST` (its own exit code is unknown: it got SIGTERM with the actor's death).

Logs are written on the actor's node at `log_dir/<name>.log`: on one machine that is the
driver's file system; on a real cluster `run_dir` must be on a file system shared by every node
(the supervisor and `agentgym-rl show` read the logs and the run's records there). `tail(n)`
asks the actor, so it works either way while the actor lives.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path
from typing import Any

from agentgym_rl.processes.child import Child, ChildSpec, Launched, log_tail

ACTOR_LOST = -int(signal.SIGKILL)
"""`poll()` / `wait()` of a `RayChild` whose actor died (the child died with it)."""

DRIVER_ONLY = ("CUDA_VISIBLE_DEVICES",)
"""Variables of the driver's environment a `RayChild` does not forward (besides `RAY_*`)."""


class ProcessActor:
    """Starts one child process at a time on its node and watches it (a Ray actor's class): a
    `Child` of the supervisor's own kind, on the actor's node."""

    def __init__(self) -> None:
        self._child: Child | None = None

    def node_ip(self) -> str:
        """The address of the node the actor runs on (as Ray knows it)."""
        import ray

        return str(ray.util.get_node_ip_address())

    def environ(self) -> dict[str, str]:
        """The actor's environment (what a child starts from)."""
        return dict(os.environ)

    def start(self, argv: list[str], env: dict[str, str], log_path: str) -> int:
        """Start `argv` (the previous child, if any, is forgotten); its pid."""
        path = Path(log_path)
        spec = ChildSpec(path.stem, "env", argv, shlex.join(argv))
        self._child = Child(spec, path.parent, {**os.environ, **env}).start()
        assert self._child.pid is not None
        return self._child.pid

    def pid(self) -> int | None:
        return None if self._child is None else self._child.pid

    def poll(self) -> int | None:
        """The exit code once the child has exited (None while it runs or before start)."""
        return None if self._child is None else self._child.poll()

    def terminate(self) -> None:
        """SIGTERM to the child itself (it stops its own children in order)."""
        if self._child is not None:
            self._child.terminate()

    def kill_group(self) -> None:
        """SIGKILL to every process left in the child's group."""
        if self._child is not None:
            self._child.kill_group()

    def wait(self, timeout_s: float) -> int | None:
        """The exit code, waiting up to `timeout_s` (None if still running)."""
        return None if self._child is None else self._child.wait(timeout_s)

    def tail(self, n: int = 30) -> list[str]:
        """The last `n` lines of the child's log."""
        return [] if self._child is None else self._child.tail(n)


class RayChild:
    """A supervised child started by a `ProcessActor` (the `Child` interface, synchronous)."""

    def __init__(
        self,
        spec: ChildSpec,
        log_dir: Path,
        env: dict[str, str] | None,
        actor: Any,
        *,
        call_timeout_s: float = 60.0,
    ) -> None:
        self.spec = spec
        self.log_path = log_dir / f"{spec.name}.log"
        self.env = env
        self.actor = actor
        self.call_timeout_s = call_timeout_s
        self.restarts = 0
        self.started_at = 0.0
        self.lost: str | None = None
        """Why the actor is gone (None while it lives)."""
        self._pid: int | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        """The child's pid on its node (not this machine's, on a cluster)."""
        return self._pid

    def child_env(self) -> dict[str, str]:
        """What the child's environment gets on top of its actor's."""
        given = self.env or {}
        kept = {k: v for k, v in given.items() if k not in DRIVER_ONLY and not k.startswith("RAY_")}
        return {**kept, **self.spec.env}

    def _call(self, method: str, *args: Any, timeout_s: float | None = None) -> Any:
        import ray

        ref = getattr(self.actor, method).remote(*args)
        return ray.get(ref, timeout=self.call_timeout_s if timeout_s is None else timeout_s)

    def _gone(self, error: Exception) -> bool:
        """Whether `error` says the actor died (remembered in `lost`)."""
        from ray.exceptions import ActorUnavailableError, RayActorError

        if isinstance(error, RayActorError) and not isinstance(error, ActorUnavailableError):
            self.lost = self.lost or str(error).splitlines()[0]
            return True
        return False

    def start(self) -> RayChild:
        self._pid = int(self._call("start", self.spec.argv, self.child_env(), str(self.log_path)))
        self.lost = None
        self.started_at = time.monotonic()
        return self

    def poll(self) -> int | None:
        """The exit code once the child has exited; None while it runs, before start, or when
        the actor does not answer in time; `ACTOR_LOST` once the actor is gone."""
        if self.lost is not None:
            return ACTOR_LOST
        if self._pid is None:
            return None
        try:
            code = self._call("poll")
        except Exception as e:
            if self._gone(e):
                return ACTOR_LOST
            from ray.exceptions import ActorUnavailableError, GetTimeoutError

            if isinstance(e, (GetTimeoutError, ActorUnavailableError)):
                return None
            raise
        return None if code is None else int(code)

    def running(self) -> bool:
        return self._pid is not None and self.poll() is None

    def _signal(self, method: str) -> None:
        if self._pid is None or self.lost is not None:
            return
        try:
            self._call(method)
        except Exception as e:
            if not self._gone(e):
                raise

    def terminate(self) -> None:
        """SIGTERM to the child itself (not its group: it stops its own children in order)."""
        self._signal("terminate")

    def kill_group(self) -> None:
        """SIGKILL to every process left in the child's group."""
        self._signal("kill_group")

    def wait(self, timeout_s: float) -> int | None:
        if self._pid is None:
            return None
        if self.lost is not None:
            return ACTOR_LOST
        timeout_s = max(timeout_s, 0.0)
        try:
            code = self._call("wait", timeout_s, timeout_s=timeout_s + self.call_timeout_s)
        except Exception as e:
            if self._gone(e):
                return ACTOR_LOST
            raise
        return None if code is None else int(code)

    def tail(self, lines: int = 30) -> list[str]:
        """The last `lines` lines of the child's log, asked of the actor (read here, from a
        shared file system, when the actor is gone or does not answer)."""
        if self.lost is None:
            try:
                return [str(line) for line in self._call("tail", lines)]
            except Exception as e:
                self._gone(e)
        return log_tail(self.log_path, lines)


class ChildGroup:
    """One process of the run that runs on several nodes (the learner: a torchrun on each),
    its members started, watched and stopped together: it has exited once any member failed
    (that member's code) or every member finished (0)."""

    def __init__(self, spec: ChildSpec, members: list[Launched]) -> None:
        self.spec = spec
        self.members = members
        self.log_path = members[0].log_path
        self.restarts = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return self.members[0].pid

    def start(self) -> ChildGroup:
        for member in self.members:
            member.start()
        return self

    def poll(self) -> int | None:
        codes = [member.poll() for member in self.members]
        failed = next((c for c in codes if c not in (None, 0)), None)
        if failed is not None:
            return failed
        return 0 if all(c == 0 for c in codes) else None

    def running(self) -> bool:
        return self.poll() is None

    def terminate(self) -> None:
        for member in self.members:
            member.terminate()

    def kill_group(self) -> None:
        for member in self.members:
            member.kill_group()

    def wait(self, timeout_s: float) -> int | None:
        deadline = time.monotonic() + max(timeout_s, 0.0)
        for member in self.members:
            member.wait(max(deadline - time.monotonic(), 0.0))
        return self.poll()

    def tail(self, lines: int = 30) -> list[str]:
        """The last lines of each member's log that has any, member after member."""
        out: list[str] = []
        for member in self.members:
            got = member.tail(lines)
            out += [f"[{member.name}] {line}" for line in got]
        return out[-lines:]


__all__ = ["ACTOR_LOST", "DRIVER_ONLY", "ChildGroup", "ProcessActor", "RayChild"]
