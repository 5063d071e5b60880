"""The ScienceWorld simulator JVMs of one server process: started, reused, bounded, replaced.

Contract: `Gateway` is one simulator JVM (the `scienceworld` jar behind py4j on 127.0.0.1) with
the raw calls an episode needs; a call that fails because the JVM is gone raises `JvmDied`.
`GatewayPool(capacity, warm, java_opts)` owns every JVM of the process: `acquire()` hands out an
idle one (or starts one while fewer than `capacity` exist) and raises `PoolExhausted` when all
`capacity` are busy; `release(gw)` takes it back for the next episode (the next `load` resets
the simulator, so a JVM is reused instead of paying a 1-2 s start per episode); `discard(gw)`
kills one that died or misbehaved. The pool keeps `warm` idle JVMs started ahead, in background
threads, so a reset rarely waits for a start. `close()` kills them all; JVMs are also started
with py4j's die-on-exit (they exit when this process's pipe to them closes), so even a killed
server leaves no java process behind.

Each JVM gets `java_opts` (default `-Xms256m -Xmx256m -XX:+UseSerialGC -XX:+AlwaysPreTouch`:
~330-355 MiB resident, flat from the start, instead of 0.7-1.1 GiB with the JVM's defaults). Everything is called from the server's
event loop, one call at a time; only warm starts run in threads, hence the lock.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any

from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
from scienceworld.constants import BASEPATH, JAR_PATH

log = logging.getLogger("agentgym_envs.sciworld")
# py4j logs a full traceback per failed connection attempt when a JVM dies; we log the death once.
logging.getLogger("py4j").setLevel(logging.CRITICAL)

# A fixed, pre-touched 256 MiB heap: each JVM is ~330 MiB resident from its start and stays
# there (measured: 332 -> 354 MiB over 180 episodes). With -Xmx768m a JVM grows over its first
# ~80 episodes to ~470 MiB, and is ~25% slower (more young-generation work per collection).
# 128 MiB works too (~220 MiB resident) but GC slows episodes by ~50%.
DEFAULT_JAVA_OPTS = ("-Xms256m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:+AlwaysPreTouch")
_PAGE = os.sysconf("SC_PAGE_SIZE")


class JvmDied(RuntimeError):
    """The simulator JVM behind a gateway is gone (killed, crashed, out of memory)."""


class PoolExhausted(RuntimeError):
    """Every JVM the pool may hold is busy."""


def rss_of(pid: int) -> int:
    """Resident bytes of process `pid` (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


class Gateway:
    """One simulator JVM and its py4j connection."""

    def __init__(self, java_opts: Sequence[str] = DEFAULT_JAVA_OPTS) -> None:
        started = time.monotonic()
        port, proc = launch_gateway(
            classpath=JAR_PATH,
            die_on_exit=True,
            cwd=BASEPATH,
            return_proc=True,
            javaopts=list(java_opts),
        )
        self.proc: subprocess.Popen[bytes] = proc
        self._gateway = JavaGateway(
            gateway_parameters=GatewayParameters(auto_field=True, port=port), java_process=proc
        )
        try:
            self._sim: Any = self._gateway.jvm.scienceworld.runtime.pythonapi.PythonInterface()
            # The first load in a JVM costs ~1 s (class loading, JIT): paid here, off the reset
            # path when the JVM is a warm start.
            self._sim.load("boil", 0, "", False)
        except Exception:
            self.kill()
            raise
        log.info("started simulator JVM pid %d in %.2f s", proc.pid, time.monotonic() - started)

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            return False
        # poll() also answers None while py4j's consumer thread sits in proc.wait() (it holds
        # the wait lock), i.e. just after the JVM died: ask the kernel too.
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except FileNotFoundError:
            return False  # already reaped
        except OSError:
            return True  # no /proc: poll() is all there is
        return state not in (b"Z", b"X")

    def rss(self) -> int:
        return rss_of(self.pid)

    def call(self, method: str, *args: Any) -> Any:
        """`PythonInterface.<method>(*args)`; `JvmDied` if the JVM is gone. A Java exception
        with the JVM alive (a simulator bug on some input) is raised as it is."""
        try:
            return getattr(self._sim, method)(*args)
        except Exception as exc:
            # Py4JJavaError: the JVM answered with an exception, so it is alive and the error is
            # the simulator's. Anything else (network errors, "error while calling") means the
            # connection or the JVM is gone.
            if type(exc).__name__ == "Py4JJavaError" and self.alive():
                raise
            self.kill()
            raise JvmDied(f"the simulator JVM (pid {self.pid}) died: {exc}") from exc

    def kill(self) -> None:
        """End the JVM now (no graceful shutdown: nothing in it needs saving)."""
        try:
            self._gateway.close()
        except Exception:  # the connection may already be broken
            pass
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.error("simulator JVM pid %d did not exit after SIGKILL", self.pid)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class GatewayPool:
    """At most `capacity` JVMs; `warm` of them kept idle ahead of demand."""

    def __init__(
        self, capacity: int, warm: int, java_opts: Sequence[str] = DEFAULT_JAVA_OPTS
    ) -> None:
        if capacity < 1:
            raise ValueError(f"jvms must be >= 1, got {capacity}")
        if not 0 <= warm <= capacity:
            raise ValueError(f"warm must be in [0, jvms={capacity}], got {warm}")
        self.capacity = capacity
        self.warm = warm
        self.java_opts = tuple(java_opts)
        self._lock = threading.Condition()
        self._idle: list[Gateway] = []
        self._busy: set[Gateway] = set()
        self._starting = 0
        self._closed = False
        self.started_total = 0
        self.replaced_total = 0  # JVMs that died or were discarded
        self._start_warm(wait=True)  # the first episodes do not pay a JVM start

    # -- the interface ---------------------------------------------------------------------------
    def acquire(self) -> Gateway:
        """An idle JVM, marked busy; starts one if none is idle and fewer than `capacity`
        exist, waits for a warm start under way; `PoolExhausted` when all are busy."""
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("the SciWorld JVM pool is closed")
                gw = self._take_idle()
                if gw is None and self._starting:
                    # a warm start under way is further along than a new one would be
                    self._lock.wait(timeout=60.0)
                    continue
                if gw is None and self._total() >= self.capacity:
                    raise PoolExhausted(
                        f"all {self.capacity} SciWorld simulator JVMs are busy with live "
                        "episodes: close finished episodes or raise --env-option "
                        f"jvms=N (now {self.capacity}; ~340 MiB each)"
                    )
                if gw is None:
                    self._starting += 1
            if gw is None:
                gw = self._start_one(into_idle=False)
            else:
                self._start_warm(wait=False)
            return gw

    def release(self, gw: Gateway) -> None:
        """Take `gw` back for a later episode (killed instead if it died or the pool closed)."""
        with self._lock:
            self._busy.discard(gw)
            if gw.alive() and not self._closed:
                self._idle.append(gw)
                self._lock.notify_all()
                return
        self.discard(gw)

    def discard(self, gw: Gateway) -> None:
        """Kill `gw` and forget it; a warm replacement is started if the pool wants one."""
        with self._lock:
            self._busy.discard(gw)
            if gw in self._idle:
                self._idle.remove(gw)
            self.replaced_total += 1
        gw.kill()
        self._start_warm(wait=False)

    def close(self) -> None:
        """Kill every JVM, idle or busy, after waiting out starts under way (they would
        otherwise outlive the pool); later acquires fail. Safe to call twice."""
        with self._lock:
            self._closed = True
            deadline = time.monotonic() + 30.0
            while self._starting and time.monotonic() < deadline:
                self._lock.wait(timeout=1.0)
            gateways = [*self._idle, *self._busy]
            self._idle.clear()
            self._busy.clear()
            self._lock.notify_all()
        for gw in gateways:
            gw.kill()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            live = [*self._idle, *self._busy]
            return {
                "jvms": self.capacity,
                "jvms_warm": self.warm,
                "jvms_live": len(live),
                "jvms_busy": len(self._busy),
                "jvms_starting": self._starting,
                "jvms_started_total": self.started_total,
                "jvms_replaced_total": self.replaced_total,
                "jvm_pids": sorted(gw.pid for gw in live),
                "jvm_rss_bytes": sum(gw.rss() for gw in live),
            }

    def any_idle(self) -> Gateway | None:
        """An idle JVM without taking it (for read-only queries such as variation counts)."""
        with self._lock:
            return next((gw for gw in self._idle if gw.alive()), None)

    # -- internals -------------------------------------------------------------------------------
    def _total(self) -> int:
        return len(self._idle) + len(self._busy) + self._starting

    def _take_idle(self) -> Gateway | None:
        while self._idle:
            gw = self._idle.pop()
            if gw.alive():
                self._busy.add(gw)
                return gw
            log.warning("idle simulator JVM pid %d had died: replaced", gw.pid)
            self.replaced_total += 1
            gw.kill()
        return None

    def _start_warm(self, *, wait: bool) -> None:
        """Start JVMs until `warm` are idle or starting (within capacity)."""
        with self._lock:
            if self._closed:
                return
            n = min(self.warm - len(self._idle) - self._starting, self.capacity - self._total())
            self._starting += max(0, n)
        threads = [
            threading.Thread(target=self._start_one, name="sciworld-jvm-start", daemon=True)
            for _ in range(max(0, n))
        ]
        for t in threads:
            t.start()
        if wait:
            for t in threads:
                t.join()

    def _start_one(self, *, into_idle: bool = True) -> Gateway:
        """Start one JVM (its `_starting` slot is already counted) into idle or busy. A failed
        warm start is logged (the next acquire starts one itself and reports the failure)."""
        gw: Gateway | None = None
        try:
            gw = Gateway(self.java_opts)
        except Exception:
            if into_idle:
                log.exception("starting a simulator JVM failed")
            else:
                raise
        finally:
            with self._lock:
                closed = self._closed
                if gw is not None and closed:
                    gw.kill()  # before `_starting` drops: close() waits for it
                elif gw is not None:
                    self.started_total += 1
                    (self._idle.append if into_idle else self._busy.add)(gw)
                self._starting -= 1
                self._lock.notify_all()
        if closed and not into_idle:
            raise RuntimeError("the SciWorld JVM pool is closed")
        return gw  # type: ignore[return-value]  # None only from a warm start (never used)
