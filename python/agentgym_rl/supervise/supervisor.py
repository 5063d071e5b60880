"""Starts the processes of a `RunPlan`, watches them and stops them in order.

Contract: `Supervisor(plan).run()` starts, in order, `init-model` (when the model must be
created; waits for it), the env servers (ready when /health answers), the learner (ready when its
receive and weights ports accept connections) and the rollout servers, then follows the run
until one of:

- the learner exits 0 (its last step): rollout servers get `final_eval_timeout_s` to finish a
  held-out evaluation and exit by themselves when `rollout.eval` is set, else are stopped at
  once; outcome "finished", exit code 0;
- every rollout server exits 0 (a finite dataset, or a sync run's last group): if the learner
  has logged its last step, it is waited for as above; otherwise outcome "crashed", exit code 1;
- a child crashes: env and rollout servers are restarted up to `restart.max_restarts` times;
  otherwise (and always for the learner) its name, exit code and last 30 log lines are printed
  and the run stops; outcome "crashed", exit code 1;
- SIGINT/SIGTERM: outcome the signal's name, exit code 130 (SIGINT) or 143 (SIGTERM); a cluster
  launcher may add SIGUSR1 (its scheduler's time-limit warning), exit code 138. A stop that
  came while the learner was in its last step, which it then finished (exit 0), is "finished".

Shutdown is always the same order: rollout servers (SIGTERM: they stop admission and drain),
then the learner (SIGTERM: it stops after the step in hand), then env servers; a child still
running after `stop_grace_s` is SIGKILLed with its whole process group, so nothing outlives the
run. A second Ctrl-C skips the grace period. How a child starts is the launcher's (`launch`:
`Child` here; an `srun` step or a Ray actor's process on a cluster). The learner and the rollout
servers share a secret made for this invocation (or given by a cluster launcher) (`AGENTGYM_RL_SECRET` in their environment), which signs every group
and weight message between them. Each invocation appends `{"start", "end",
"outcome", "exit_code", "resume"}` to `run_dir/run.jsonl` (summaries add up wall time), and
every child start and exit seen goes to `run_dir/children.jsonl` (`{"time", "child", "event":
"start" | "exit", "pid", "code"}`: which process was which, for operators and the chaos runner).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import FrameType

from agentgym_rl.auth import ENV_VAR as SECRET_ENV_VAR
from agentgym_rl.auth import new_secret
from agentgym_rl.config.train import TrainConfig
from agentgym_rl.metric_sinks.scalars import MetricSink
from agentgym_rl.processes.child import (
    Child,
    ChildExited,
    ChildSpec,
    Launched,
    NotReady,
    health_ok,
    wait_ready,
)
from agentgym_rl.supervise.children import RunPlan
from agentgym_rl.supervise.progress import ProgressView, RunWatcher

EXIT = {"finished": 0, "crashed": 1, "SIGINT": 130, "SIGUSR1": 138, "SIGTERM": 143}
"""Outcome -> exit code (SIGUSR1: a scheduler's time-limit warning, `agentgym_rl.cluster`)."""


def metric_sinks(train: TrainConfig) -> list[MetricSink]:
    """The metric sinks `train.logging` asks for (W&B's config is the train config)."""
    sinks: list[MetricSink] = []
    if train.logging.tensorboard:
        from agentgym_rl.metric_sinks.tensorboard import TensorBoardLog

        sinks.append(TensorBoardLog(train.run_dir))
    wandb = train.logging.wandb
    if wandb is not None:
        from agentgym_rl.metric_sinks.wandb_run import WandbRun

        config = train.model_dump(mode="json")
        sinks.append(WandbRun(train.run_dir, config=config, **wandb.model_dump()))
    return sinks


class _Stop(Exception):
    """Raised inside the start-up and monitor loops to end the run with an outcome."""

    def __init__(self, outcome: str) -> None:
        super().__init__(outcome)
        self.outcome = outcome


def _listening(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


Launch = Callable[[ChildSpec, Path, "dict[str, str]"], Launched]
"""Makes the child of a spec (its log folder, its environment): `Child` on this machine."""


class Supervisor:
    """Runs one plan to its end (see the module docstring for the outcomes)."""

    def __init__(
        self,
        plan: RunPlan,
        view: ProgressView | None = None,
        *,
        resume: bool = False,
        secret: str | None = None,
        launch: Launch = Child,
        signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM),
    ) -> None:
        self.plan = plan
        self.resume = resume
        train = plan.train
        self.log_dir = train.run_dir / "logs"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.init = launch(plan.init, self.log_dir, env) if plan.init else None
        self.envs = [launch(s, self.log_dir, env) for s in plan.envs]
        # A secret signs the group and weight streams (a new one for each run unless a launcher
        # made the run's); it reaches the learner and the rollout servers through their
        # environment, never a command line.
        signed = {**env, SECRET_ENV_VAR: secret or new_secret()}
        threads = {"OMP_NUM_THREADS": str(train.threads_per_learner_rank())}
        if train.learner_shares_cores() and "OMP_WAIT_POLICY" not in os.environ:
            # a thread spinning at a barrier burns the core its descheduled peer (or the
            # engine) waits for
            threads["OMP_WAIT_POLICY"] = "PASSIVE"
        self.learn = launch(plan.learn, self.log_dir, {**signed, **threads})
        self.rollouts = [launch(s, self.log_dir, signed) for s in plan.rollouts]
        self.view = view or ProgressView(plan.learn_config.max_steps)
        eval_env = plan.rollout_configs[0].dataset.envs[0]
        sinks = metric_sinks(train)
        self.watcher = RunWatcher(train.run_dir, plan.learn_config.max_steps, sinks, eval_env)
        self.poll_s = 0.5
        self.stop_signals = signals
        self._signals: list[str] = []

    # --- signals -----------------------------------------------------------------------------
    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals.append(signal.Signals(signum).name)

    def _check_signal(self) -> None:
        if self._signals:
            raise _Stop(self._signals[0])

    def _sleep(self) -> None:
        time.sleep(self.poll_s)
        self._check_signal()

    # --- start-up ----------------------------------------------------------------------------
    def _crashed(self, child: Launched, code: int, during: str = "") -> _Stop:
        where = f" {during}" if during else ""
        self.view.message(
            f"train: {child.name} exited with code {code}{where}; last lines of {child.log_path}:"
        )
        for line in child.tail(30):
            self.view.message(f"  | {line}")
        return _Stop("crashed")

    def _wait_until(
        self,
        child: Launched,
        ready: Callable[[], bool],
        what: str,
        *,
        bounded: bool = True,
        phase: str = "",
    ) -> None:
        """Wait for `ready`; a child that exits first is a crash. `bounded`: give up after
        `startup_timeout_s` (servers); model creation is a finite job that takes as long as the
        machine needs, so it is waited for without a deadline (Ctrl-C still stops it). With a
        `phase`, the child's latest log line is shown as that phase's progress."""
        timeout = self.plan.train.startup_timeout_s

        def tick() -> None:
            if phase:
                self.view.phase(phase, next(reversed(child.tail(1)), ""))
            self._check_signal()  # Ctrl-C stops the wait

        try:
            wait_ready(child, ready, timeout if bounded else None, tick)
        except ChildExited as e:
            raise self._crashed(child, e.code, "while starting") from None
        except NotReady:
            self.view.message(
                f"train: {child.name} not ready after {timeout:.0f}s ({what}); see "
                f"{child.log_path} or raise startup_timeout_s"
            )
            raise _Stop("crashed") from None

    def _start(self) -> None:
        if self.init is not None:
            self.view.message(f"train: creating the model ({self.init.spec.shell})")
            self._launch(self.init)
            init = self.init
            self._wait_until(
                init, lambda: init.poll() == 0, "init-model", bounded=False, phase="model"
            )
            self._note(init, "exit", 0)  # summaries leave model creation out of rates
        for child in self.envs:
            self._launch(child)
        for child in self.envs:
            port, host = child.spec.health_port, child.spec.address or child.spec.host
            if port is not None:
                ready = partial(health_ok, port, host)
                self._wait_until(child, ready, f"/health on {host}:{port}")
        self.view.message(f"train: {len(self.envs)} env server(s) ready")
        self._launch(self.learn)
        ports = self.learn.spec.listen_ports
        host = self.learn.spec.address or self.learn.spec.host
        listening = lambda: all(_listening(host, p) for p in ports)  # noqa: E731
        self._wait_until(self.learn, listening, f"ports {ports} on {host}")
        self.view.message("train: learner ready")
        for child in self.rollouts:
            self._launch(child)
        self.view.message(f"train: {len(self.rollouts)} rollout server(s) started")

    def _launch(self, child: Launched) -> None:
        child.start()
        self._note(child, "start", code=None)

    def _note(self, child: Launched, event: str, code: int | None) -> None:
        record = {"time": time.time(), "child": child.name, "event": event, "pid": child.pid}
        with (self.plan.run_dir / "children.jsonl").open("a") as f:
            f.write(json.dumps({**record, "code": code}) + "\n")

    # --- following the run -------------------------------------------------------------------
    def _restart_or_stop(self, child: Launched, code: int) -> None:
        self._note(child, "exit", code)
        limit = self.plan.train.restart.max_restarts
        if child.restarts >= limit:
            raise self._crashed(child, code)
        child.restarts += 1
        child.kill_group()
        self.view.message(
            f"train: {child.name} exited with code {code}; restart {child.restarts}/{limit}"
        )
        self._launch(child)

    def _monitor(self) -> str:
        ended: set[str] = set()
        saving = False
        while True:
            self.view.update(self.watcher.poll())
            code = self.learn.poll()
            if code is not None:
                self._note(self.learn, "exit", code)
                self.view.update(self.watcher.poll())
                if code != 0:
                    raise self._crashed(self.learn, code)
                return self._final_eval()
            for child in self.envs:
                code = child.poll()
                if code is not None:
                    self._restart_or_stop(child, code)
            for child in self.rollouts:
                code = child.poll()
                if code is None or child.name in ended:
                    continue
                if code == 0:
                    ended.add(child.name)
                    self.view.message(f"train: {child.name} finished (exit 0)")
                else:
                    self._restart_or_stop(child, code)
            if len(ended) == len(self.rollouts) and not saving:
                if self.watcher.poll().step < self.plan.learn_config.max_steps:
                    self.view.message(
                        "train: every rollout server ended before the learner's last step "
                        "(rollout.dataset.epochs too small?)"
                    )
                    raise _Stop("crashed")
                # A sync run's servers end after its last group and final eval while the
                # learner may still be saving that step: wait for its exit as above.
                saving = True
                self.view.message(
                    "train: rollout servers done; the learner is saving its last step"
                )
            self._sleep()

    def _final_eval(self) -> str:
        state = self.watcher.state
        self.view.message(f"train: learner finished at step {state.step}")
        if not self.plan.has_eval:
            return "finished"
        timeout = self.plan.train.final_eval_timeout_s
        self.view.message(f"train: waiting up to {timeout:.0f}s for the final held-out eval")
        deadline = time.monotonic() + timeout
        while any(c.running() for c in self.rollouts) and time.monotonic() < deadline:
            self.view.update(self.watcher.poll())
            self._sleep()
        for child in self.rollouts:
            code = child.poll()
            if code not in (None, 0):
                self.view.message(f"train: {child.name} exited with code {code} after training")
        return "finished"

    # --- shutdown ----------------------------------------------------------------------------
    def _stop_all(self, children: list[Launched]) -> None:
        running = [c for c in children if c.running()]
        for child in running:
            child.terminate()
        deadline = time.monotonic() + self.plan.train.stop_grace_s
        for child in running:
            while child.wait(0.2) is None and time.monotonic() < deadline:
                if len(self._signals) > 1:  # a second Ctrl-C: no more grace
                    break
            if child.running():
                self.view.message(f"train: {child.name} did not stop in time; killing it")
        for child in children:
            child.kill_group()
            child.wait(10.0)

    def shutdown(self) -> None:
        """Stop everything: rollout servers, the learner, env servers (in that order)."""
        self._stop_all(self.rollouts)
        self._stop_all([self.learn])
        self._stop_all([*self.envs, *([self.init] if self.init else [])])

    def run(self) -> int:
        """Start, follow and stop the run; returns the exit code."""
        handlers = {s: signal.signal(s, self._on_signal) for s in self.stop_signals}
        started = time.time()
        outcome = "crashed"
        try:
            self._start()
            outcome = self._monitor()
        except _Stop as stop:
            outcome = stop.outcome
        finally:
            if outcome.startswith("SIG"):
                self.view.message(f"train: {outcome}: stopping (rollouts, learner, env servers)")
            self.shutdown()
            self.view.update(self.watcher.poll())
            if outcome.startswith("SIG") and self._learner_done():
                self.view.message("train: the learner finished its last step while stopping")
                outcome = "finished"
            self.view.close()
            for sink in self.watcher.sinks:
                sink.close()
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            self._record(started, outcome)
        return EXIT[outcome]

    def _learner_done(self) -> bool:
        """The learner exited 0 after its last step (a stop that came during that step)."""
        steps = self.plan.learn_config.max_steps
        return self.learn.poll() == 0 and self.watcher.state.step >= steps

    def _record(self, started: float, outcome: str) -> None:
        path: Path = self.plan.run_dir / "run.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "start": started,
            "end": time.time(),
            "outcome": outcome,
            "exit_code": EXIT[outcome],
            "resume": self.resume,
            "step": self.watcher.state.step,
        }
        with path.open("a") as f:
            f.write(json.dumps(record) + "\n")
