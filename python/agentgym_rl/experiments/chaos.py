"""Fault injection on a real `train` run: SIGKILL chosen children at chosen steps, then resume.

Contract: `run_chaos(config, faults, ...)` starts `agentgym-rl train --config CONFIG` (its own
process, exactly as a user runs it) and follows `learn/metrics.jsonl`. When the learner reaches
a fault's step it SIGKILLs that child's process group (the pid comes from
`run_dir/children.jsonl`): an env server or a rollout server is restarted by the supervisor
(`restart.max_restarts` must allow it); a killed learner ends the run, and `agentgym-rl train
--resume RUN_DIR` continues it. A "train" fault SIGKILLs the `train` process itself: its
children must end by themselves (`processes/orphans.py`; `FaultReport.orphans_s` is how long
the last of them took, None if one outlived `ORPHAN_WAIT_S`), then the run is resumed. This repeats until the learner's last step. It returns one
`FaultReport` per fault (the step it hit, the seconds until the learner took its next step, and
the steps lost: those after the last checkpoint, for a learner) and the run's group accounting
(`report/groups.py`). `agentgym-rl chaos` prints both. Stopped itself (Ctrl-C, SIGTERM), it
stops its `train` by the same signal (then SIGKILL after `TRAIN_STOP_S`), so the run's record
says how it was stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentgym_rl.processes.child import cli_argv
from agentgym_rl.processes.interrupt import Stop
from agentgym_rl.report.groups import Accounting, account
from agentgym_rl.report.records import read_jsonl

ROLES = ("env", "rollout", "learner", "train")
ORPHAN_WAIT_S = 30.0
"""How long the children of a killed `train` are given to end."""
TRAIN_STOP_S = 90.0
"""How long a `train` stopped with chaos is given to stop its children (SIGKILL after)."""


@dataclass(frozen=True)
class Fault:
    role: str
    """"env" (the first env server), "rollout" (the first rollout server) or "learner"."""
    step: int
    """Kill once the learner has logged this step."""

    @classmethod
    def parse(cls, text: str) -> Fault:
        role, _, step = text.partition("@")
        if role not in ROLES or not step.isdigit():
            raise ValueError(f"fault {text!r}: expected ROLE@STEP with ROLE one of {ROLES}")
        return cls(role, int(step))


@dataclass
class FaultReport:
    fault: Fault
    killed_pid: int
    at_step: int
    killed_at: float
    """Wall-clock time of the kill."""
    recovered_s: float | None = None
    """Seconds from the kill to the learner's next new step (None: never)."""
    steps_lost: int = 0
    orphans_s: float | None = None
    """A "train" fault: seconds until the last of its children had ended."""


@dataclass
class ChaosResult:
    faults: list[FaultReport]
    final_step: int
    exit_codes: list[int]
    """`train`'s exit code, first run then each `--resume`."""
    accounting: Accounting
    wall_s: float
    log: list[str] = field(default_factory=list)


def _learner_steps(run_dir: Path) -> list[tuple[float, int]]:
    return [(r["time"], r["step"]) for r in read_jsonl(run_dir / "learn" / "metrics.jsonl")]


def _child_pid(run_dir: Path, role: str) -> int | None:
    """The newest live pid of the first child of `role` (from the supervisor's record)."""
    prefix = {"env": "env-", "rollout": "rollout-", "learner": "learn"}[role]
    starts = [
        r
        for r in read_jsonl(run_dir / "children.jsonl")
        if r.get("event") == "start" and str(r.get("child", "")).startswith(prefix)
    ]
    if not starts:
        return None
    first_name = starts[0]["child"]
    return next((r["pid"] for r in reversed(starts) if r["child"] == first_name), None)


def _checkpointed(run_dir: Path) -> int:
    steps = [
        int(p.name.removeprefix("step_"))
        for p in (run_dir / "checkpoints").glob("step_*")
        if (p / "COMPLETE").is_file()
    ]
    return max(steps, default=0)


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # children run in their own session: pid == pgid
    except ProcessLookupError:
        pass


def run_chaos(
    config: Path,
    faults: list[Fault],
    *,
    max_resumes: int = 2,
    timeout_s: float = 3600.0,
    echo: bool = True,
    stop: Stop | None = None,
) -> ChaosResult:
    """Run `train` with `faults` injected (see the module docstring); stopped inside
    `interruptible`'s block, it passes its `stop`'s signal on to the train in hand."""
    from agentgym_rl.config.loader import load_config
    from agentgym_rl.config.train import TrainConfig

    train = load_config(TrainConfig, config, [])
    run_dir, max_steps = train.run_dir, train.learn.max_steps
    pending = sorted(faults, key=lambda f: f.step)
    reports: list[FaultReport] = []
    codes: list[int] = []
    t0 = time.monotonic()
    argv = cli_argv("train", "--config", str(config))
    while True:
        # a session of its own: a terminal's Ctrl-C reaches chaos alone, which passes one on
        proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL if not echo else None, start_new_session=True
        )
        try:
            while proc.poll() is None:
                if time.monotonic() - t0 > timeout_s:
                    raise TimeoutError(f"chaos run exceeded {timeout_s:.0f} s")
                _follow(run_dir, pending, reports, train_pid=proc.pid)
                time.sleep(0.5)
        except BaseException:  # Ctrl-C or SIGTERM (KeyboardInterrupt), the timeout
            _stop_train(proc, stop.signal if stop is not None and stop.signal else signal.SIGTERM)
            raise
        if reports and reports[-1].fault.role == "train" and reports[-1].orphans_s is None:
            reports[-1].orphans_s = _orphans_gone(run_dir, reports[-1].killed_at)
        codes.append(proc.returncode)
        _follow(run_dir, [], reports)
        last = max((s for _, s in _learner_steps(run_dir)), default=0)
        if last >= max_steps or len(codes) > max_resumes:
            break
        argv = cli_argv("train", "--resume", str(run_dir))
    return ChaosResult(
        faults=reports,
        final_step=max((s for _, s in _learner_steps(run_dir)), default=0),
        exit_codes=codes,
        accounting=account(run_dir),
        wall_s=time.monotonic() - t0,
    )


def _stop_train(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Stop the `train` in hand by `sig` (the one chaos got): its supervisor stops its children
    in order and records the run stopped by it (`train --resume` goes on from its last
    checkpoint)."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(TRAIN_STOP_S)
    except subprocess.TimeoutExpired:
        _kill(proc.pid)
        proc.wait()


def _live_children(run_dir: Path) -> list[int]:
    """The pids the supervisor started that still run (zombies count as ended)."""
    started = {
        r["pid"] for r in read_jsonl(run_dir / "children.jsonl") if r.get("event") == "start"
    }
    live = []
    for pid in started:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            live.append(pid)
    return live


def _orphans_gone(run_dir: Path, killed_at: float) -> float | None:
    """Seconds from `killed_at` until no child of the run is left (None: one outlived the
    wait; what is left is then killed, so that a resume starts clean)."""
    deadline = time.monotonic() + ORPHAN_WAIT_S
    while _live_children(run_dir):
        if time.monotonic() > deadline:
            for pid in _live_children(run_dir):
                _kill(pid)
            return None
        time.sleep(0.1)
    return time.time() - killed_at


def _follow(
    run_dir: Path, pending: list[Fault], reports: list[FaultReport], train_pid: int = 0
) -> None:
    """Inject the faults whose step has come; time the recoveries still open."""
    steps = _learner_steps(run_dir)
    newest = max((s for _, s in steps), default=0)
    for report in reports:
        later = [t for t, _ in steps if t > report.killed_at]
        if report.recovered_s is None and later:
            report.recovered_s = min(later) - report.killed_at
    while pending and newest >= pending[0].step:
        fault = pending[0]
        pid = train_pid if fault.role == "train" else _child_pid(run_dir, fault.role)
        if pid is None:
            return  # not started yet: try at the next poll
        pending.pop(0)
        lost = newest - _checkpointed(run_dir) if fault.role in ("learner", "train") else 0
        reports.append(FaultReport(fault, pid, newest, time.time(), steps_lost=lost))
        if fault.role == "train":  # the supervisor alone: its children must end by themselves
            os.kill(pid, signal.SIGKILL)
            return
        _kill(pid)


def table(result: ChaosResult) -> str:
    """The figures as a plain table."""
    lines = [
        f"{'fault':<10} {'at step':>7} {'pid':>8} {'steps lost':>10} {'recovered in':>13}",
    ]
    for r in result.faults:
        rec = "never" if r.recovered_s is None else f"{r.recovered_s:.1f} s"
        line = f"{r.fault.role:<10} {r.at_step:>7} {r.killed_pid:>8} {r.steps_lost:>10} {rec:>13}"
        if r.fault.role == "train":
            gone = "outlived the wait" if r.orphans_s is None else f"{r.orphans_s:.1f} s"
            line += f"  (its children ended in {gone})"
        lines.append(line)
    acc = result.accounting
    lines += [
        "",
        f"final step {result.final_step}; train exit codes {result.exit_codes}; "
        f"wall {result.wall_s / 60:.1f} min",
        f"groups: {acc.line()}" + ("" if acc.balanced else "  (DOES NOT BALANCE)"),
        f"processes killed (from the ledgers): {dict(acc.killed)}; "
        f"trained twice: {len(acc.trained_twice)}",
    ]
    return "\n".join(lines)
