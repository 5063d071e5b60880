"""One run on one machine from Python: what `agentgym-rl train` does, as calls.

Contract: `train(config)` plans the run (`plan.py`; a bad config or a busy port raises
`PlanError` listing every problem, before anything starts), writes `run_dir/configs/`, runs the
supervised children to the end in this process (`Supervisor`, which needs the main thread for
its signal handlers) and writes the report; it returns a `RunResult`. With `background=True`
the same run is an `agentgym-rl train` child process instead and a `RunHandle` comes back at
once: `.status()`, `.metrics()`, `.stop()`, `.wait()`. Either way the run's processes end with
this process (`processes.ownership.owning`). `resume(run_dir)` continues a stopped run from its
own `configs/train.yaml`, as `train --resume` does.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

from agentgym_rl.config.train import TrainConfig
from agentgym_rl.learner.checkpoint_dirs import complete_checkpoints
from agentgym_rl.processes.child import cli_argv
from agentgym_rl.processes.ownership import owning
from agentgym_rl.report import write_report
from agentgym_rl.report.records import read_jsonl
from agentgym_rl.supervise.children import RunPlan, write_plan
from agentgym_rl.supervise.plan import PlanError, plan_run
from agentgym_rl.supervise.supervisor import EXIT, Supervisor

OUTCOMES = {code: outcome for outcome, code in EXIT.items()}
"""Exit code -> outcome: the supervisor's table read backwards."""


@dataclass(frozen=True)
class RunResult:
    """How a run ended."""

    run_dir: Path
    exit_code: int
    """0 finished, 1 a child crashed, 2 the run could not start, 130/143 stopped by a signal."""

    @property
    def outcome(self) -> str:
        return OUTCOMES.get(self.exit_code, f"exit {self.exit_code}")

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class RunHandle:
    """A run going on in a child process (`train(..., background=True)`)."""

    def __init__(self, run_dir: Path, process: subprocess.Popen[bytes]) -> None:
        self.run_dir = run_dir
        self.process = process

    def status(self) -> dict[str, Any]:
        """`{"running", "step", "exit_code"}`: the learner's last step and, once over, the
        exit code."""
        metrics = self.metrics()
        step = int(metrics[-1].get("step", 0)) if metrics else 0
        code = self.process.poll()
        return {"running": code is None, "step": step, "exit_code": code}

    def metrics(self) -> list[dict[str, Any]]:
        """The learner's records so far (`learn/metrics.jsonl`, one per step)."""
        return read_jsonl(self.run_dir / "learn" / "metrics.jsonl")

    def stop(self, timeout_s: float = 120.0) -> RunResult:
        """Stop the run as Ctrl-C does (children drain and checkpoint); its result."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        return self.wait(timeout_s)

    def wait(self, timeout_s: float | None = None) -> RunResult:
        """Wait for the run to end (raises `subprocess.TimeoutExpired` past `timeout_s`)."""
        return RunResult(self.run_dir, self.process.wait(timeout_s))


@overload
def train(
    config: TrainConfig | str | Path,
    *,
    overrides: Sequence[str] = (),
    background: Literal[False] = False,
    say: Callable[[str], None] = print,
) -> RunResult: ...


@overload
def train(
    config: TrainConfig | str | Path,
    *,
    overrides: Sequence[str] = (),
    background: Literal[True],
    say: Callable[[str], None] = print,
) -> RunHandle: ...


def train(
    config: TrainConfig | str | Path,
    *,
    overrides: Sequence[str] = (),
    background: bool = False,
    say: Callable[[str], None] = print,
) -> RunResult | RunHandle:
    """Run `config` (a `TrainConfig` or the path of its YAML); see the module docstring."""
    if not isinstance(config, TrainConfig):
        config = TrainConfig.from_yaml(config, overrides)
    elif overrides:
        config = TrainConfig.from_yaml(_written(config), overrides)
    return _start(config, resume=False, background=background, say=say)


@overload
def resume(
    run_dir: str | Path,
    *,
    overrides: Sequence[str] = (),
    background: Literal[False] = False,
    say: Callable[[str], None] = print,
) -> RunResult: ...


@overload
def resume(
    run_dir: str | Path,
    *,
    overrides: Sequence[str] = (),
    background: Literal[True],
    say: Callable[[str], None] = print,
) -> RunHandle: ...


def resume(
    run_dir: str | Path,
    *,
    overrides: Sequence[str] = (),
    background: bool = False,
    say: Callable[[str], None] = print,
) -> RunResult | RunHandle:
    """Continue the stopped run in `run_dir` (its learner from the newest complete checkpoint,
    its rollout servers from their dataset cursors)."""
    path = Path(run_dir) / "configs" / "train.yaml"
    if not path.is_file():
        raise PlanError([f"{path} not found: {run_dir} is not a train run folder"])
    config = TrainConfig.from_yaml(path, overrides)
    config = config.model_copy(update={"run_dir": Path(run_dir)})  # the folder may have moved
    return _start(config, resume=True, background=background, say=say)


def _start(
    config: TrainConfig, *, resume: bool, background: bool, say: Callable[[str], None]
) -> RunResult | RunHandle:
    plan = plan_run(config, resume=resume)  # raises PlanError before anything starts
    with owning():  # the run ends with this process, in the background too
        if background:
            return _spawn(config, resume)
        return RunResult(config.run_dir, run_plan(plan, resume=resume, say=say))


def run_plan(
    plan: RunPlan,
    *,
    resume: bool,
    say: Callable[[str], None] = print,
    who: str = "train",
    **supervisor: Any,
) -> int:
    """Write `plan`'s configs, supervise its children to the end (`Supervisor`, with the
    launcher's `supervisor` options: its secret, how children start, which signals stop the
    run), write the report; the exit code."""
    run_dir = plan.run_dir
    done = _nothing_left(plan) if resume else None
    if done is not None:  # starting the children would wait on weights no learner sends
        say(f"{who}: {done}")
        return EXIT["finished"]
    configs = write_plan(plan)
    say(f"{who}: run folder {run_dir} (configs and commands in {configs})")
    code = Supervisor(plan, resume=resume, **supervisor).run()
    try:
        written = write_report(run_dir)
    except Exception as e:  # a plotting problem must not hide the run's own outcome
        say(f"{who}: could not write the report: {e!r}")
    else:
        summary = next(p for p in written if p.name == "summary.md")
        say(f"{who}: plots in {run_dir / 'plots'}, summary in {summary}")
    say(f"{who}: logs in {run_dir / 'logs'}; exit {code}")
    return code


def _nothing_left(plan: RunPlan) -> str | None:
    """Why a resumed run has nothing left to do, or None: its newest complete checkpoint is at
    `learn.max_steps` and every rollout server's final held-out eval is on record (a final eval
    cut short is not redone here: `agentgym-rl eval --run` evaluates the last checkpoint)."""
    found = complete_checkpoints(plan.learn_config.checkpoint.dir)
    last, steps = (found[-1][0] if found else 0), plan.learn_config.max_steps
    if last < steps:
        return None
    missing = [
        config.log_dir.name
        for config in plan.rollout_configs
        if config.eval is not None
        and not any(
            int(r.get("version", -1)) >= steps for r in read_jsonl(config.log_dir / "eval.jsonl")
        )
    ]
    more = (
        f"to train further, resume with a higher learn.max_steps (`agentgym-rl train --resume "
        f"{plan.run_dir} learn.max_steps={steps + steps // 2}`)"
    )
    if missing:
        return (
            f"{plan.run_dir} already finished at step {last} (learn.max_steps {steps}); the final "
            f"held-out eval of {', '.join(missing)} is not on record: `agentgym-rl eval --run "
            f"{plan.run_dir}` evaluates the last checkpoint; {more}"
        )
    return f"{plan.run_dir} already finished at step {last} (learn.max_steps {steps}); {more}"


def _written(config: TrainConfig) -> Path:
    """`config` as YAML in its run folder (what overrides and a background child read)."""
    path = config.run_dir / "configs" / "requested.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    config.to_yaml(path)
    return path


def _spawn(config: TrainConfig, resume: bool) -> RunHandle:
    where = ["--resume", str(config.run_dir)] if resume else ["--config", str(_written(config))]
    log = config.run_dir / "logs" / "train.log"  # what `train` prints; its children log beside
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            cli_argv("train", *where),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() signals the whole run
        )
    return RunHandle(config.run_dir, process)


__all__ = ["RunHandle", "RunResult", "resume", "run_plan", "train"]
