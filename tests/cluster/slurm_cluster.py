"""A real SLURM cluster on this one host, for tests that submit real jobs.

`SlurmCluster().start()` writes, in a new temp dir, a munge key, `slurm.conf` (and `cgroup.conf`)
and starts a private `munged` (its own socket: a system munge is neither used nor disturbed),
`slurmctld` and one `slurmd` per node, all on 127.0.0.1 with ports free a moment before, and
waits until `sinfo` shows every node idle. `stop()` cancels the jobs, stops the daemons and
kills whatever of the cluster is left (job processes included).

Facts of Slurm 22.05 (Debian's packages) that shaped it:

- Several nodes on one host (`NodeName=agXXXX[1-3] NodeHostname=<host> NodeAddr=127.0.0.1`,
  one `slurmd -N` each, Debian builds Slurm with multiple-slurmd support): a heterogeneous job
  is scheduled by the backfill scheduler only, which plans each component on whole nodes, so
  the components of one het job never share a node and a 3-component job on a single-node
  cluster stays pending forever (it plans the components one after the other).
- `SchedulerParameters=bf_interval=1,sched_interval=1`: het jobs start within a second, not
  after up to 30 s (the backfill interval); and a job whose begin time passes (a requeued one)
  starts within a second, not at the next full scheduling pass (60 s by default): the passage
  of time alone wakes neither scheduler.
- `AuthInfo=...,cred_expire=N`: a requeued job becomes eligible again only N+1 s after its
  requeue is done (Slurm's default N is 120 s; 10 here). `scontrol update JobId=ID
  StartTime=now` (from outside the job, once it is pending again) makes it eligible at once and
  wakes the scheduler, but a job started so in the second its old credential was revoked is
  killed at launch ("Job credential revoked") and ends FAILED: wait out N instead.
  `scontrol release` changes nothing.
- A requeued het job, eligible again, still waits: only the backfill scheduler starts het jobs,
  and it runs a pass only when a job, node or partition record changed since its last one (time
  passing a begin time changes none). On this idle cluster the next change came 120 s after
  each requeue; any record change (`scontrol update JobId=ID Comment=...`) starts the job at
  its first pass once eligible.
- `ProctrackType=proctrack/cgroup` (cgroup v1 freezer) where the host has it, as real clusters
  do: it also kills what left the job's process tree or group (a `setsid` child that ignores
  SIGTERM). Elsewhere `proctrack/linuxproc`, which misses such orphans.
- `KillWait=5` (Slurm's default is 30): a job's processes get SIGTERM, and SIGKILL 5 s later;
  short, so that tests of stubborn processes stay short.
"""

from __future__ import annotations

import atexit
import os
import random
import re
import shutil
import signal
import socket
import string
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from agentgym_rl.processes.ports import free_ports

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("munge", "sbatch", "srun", "scontrol", "scancel", "sinfo", "squeue")
SBIN_DIRS = ("/usr/sbin", "/sbin", "/usr/local/sbin")
# job states after which a job does not run again by itself
FINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)
_CLIENT_ENV_PREFIXES = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "SQUEUE_", "SINFO_")
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_:/]*=")


class ClusterUnavailable(RuntimeError):
    """The cluster cannot run here; the message says why (the fixture skips with it)."""


def find_binaries() -> dict[str, str]:
    """Absolute paths of the daemons and client commands (PATH, then the sbin dirs)."""
    search = os.pathsep.join([os.environ.get("PATH", ""), *SBIN_DIRS])
    found = {name: shutil.which(name, path=search) for name in DAEMONS + CLIENTS}
    missing = sorted(name for name, path in found.items() if path is None)
    if missing:
        raise ClusterUnavailable(
            f"SLURM is not installed: {', '.join(missing)} not found on PATH or in "
            f"{', '.join(SBIN_DIRS)} (as root, `scripts/install.sh --dev` installs Debian's "
            "slurmctld slurmd slurm-client munge)"
        )
    return {name: str(path) for name, path in found.items()}


def _freezer_mount() -> Path | None:
    """The cgroup v1 freezer hierarchy, where it is mounted as `<dir>/freezer` and writable."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        fields = line.split()
        if len(fields) < 4 or fields[2] != "cgroup" or "freezer" not in fields[3].split(","):
            continue
        mount = Path(fields[1])
        probe = mount / f"agentgym-probe-{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError:
            return None
        return mount if mount.name == "freezer" else None
    return None


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def parse_record(line: str) -> dict[str, str]:
    """One `scontrol show ... -o` line as a dict (a value may hold spaces)."""
    record: dict[str, str] = {}
    key = None
    for token in line.strip().split(" "):
        if _KEY.match(token):
            key, _, value = token.partition("=")
            record[key] = value
        elif key is not None and token:
            record[key] += " " + token
    return record


class SlurmCluster:
    """A one-host SLURM cluster of `nodes` nodes with `cpus` CPUs each (oversubscribed on
    purpose), one partition `debug`, no accounting (`scontrol`, never `sacct`)."""

    partition = "debug"

    def __init__(
        self,
        nodes: int = 3,
        cpus: int = 16,
        kill_wait: int = 5,
        cred_expire: int = 10,
        min_job_age: int = 600,
        start_timeout_s: float = 60.0,
    ) -> None:
        self.node_count = nodes
        self.cpus = cpus
        self.kill_wait = kill_wait
        self.cred_expire = cred_expire  # a requeued job waits this + 1 s (Slurm: min 5)
        self.min_job_age = min_job_age  # how long a finished job's record stays (scontrol)
        self.start_timeout_s = start_timeout_s
        self.hostname = socket.gethostname().split(".")[0]
        prefix = "ag" + "".join(random.choices(string.ascii_lowercase, k=6))
        self.node_expr = f"{prefix}[1-{nodes}]"
        self.nodes = [f"{prefix}{i}" for i in range(1, nodes + 1)]
        self.root: Path | None = None
        self.conf: Path | None = None
        self.proctrack = ""
        self.startup_s = 0.0
        # the whole environment of a process that talks to this cluster: this process's, less
        # any SLURM_/SBATCH_/SRUN_... variable (of a job this session may run in), plus
        # SLURM_CONF; the cluster's daemons run with it too, and jobs inherit it from sbatch
        self.env: dict[str, str] = {}
        self.bin: dict[str, str] = {}
        self._procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        self._freezer: Path | None = None
        self._stopped = False

    # ----- start and stop -------------------------------------------------------------------

    def start(self) -> SlurmCluster:
        """Start munged, slurmctld and the slurmds; ready when every node is idle. Raises
        `ClusterUnavailable` (having cleaned up) where the cluster cannot run."""
        began = time.monotonic()
        if os.geteuid() != 0:
            raise ClusterUnavailable(
                f"the SLURM cluster needs root (SlurmUser=root, slurmd runs the jobs); uid is "
                f"{os.geteuid()}"
            )
        self.bin = find_binaries()
        self.root = Path(tempfile.mkdtemp(prefix="slurm-"))
        self.root.chmod(0o755)
        atexit.register(self.stop)
        try:
            self._write_config()
            self._start_munged()
            self._start_daemon("slurmctld", [self.bin["slurmctld"], "-D", "-i"], "slurmctld")
            self._wait_for(
                "slurmctld answers",
                lambda: self._run("scontrol", "ping", check=False).stdout.count("UP") > 0,
            )
            for node in self.nodes:
                self._start_daemon(
                    f"slurmd {node}", [self.bin["slurmd"], "-D", "-N", node], f"slurmd-{node}"
                )
            self._wait_for("every node idle", self._all_idle)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - began
        return self

    def stop(self) -> list[str]:
        """Cancel every job, stop the daemons and kill what is left of the cluster. Returns
        the processes that survived all that ("pid cmdline"; none is expected), and then
        keeps the temp dir with the logs; otherwise the temp dir is removed."""
        if self._stopped or self.root is None:
            return []
        self._stopped = True
        if self._alive("slurmctld"):
            self._run("scancel", f"--partition={self.partition}", check=False)
            deadline = time.monotonic() + self.kill_wait + 15
            while time.monotonic() < deadline:
                queue = self._run("squeue", "-h", "-o", "%i", check=False)
                if queue.returncode == 0 and not queue.stdout.strip():
                    break
                time.sleep(0.3)
        for _, proc, _ in reversed(self._procs):  # the slurmds, slurmctld, then munged
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self._kill_leftovers()
        survivors = [f"{pid} {self._cmdline(pid)}" for pid in self._cluster_pids()]
        self._remove_cgroups()
        if survivors:  # the logs stay, for the teardown's failure
            return [*survivors, f"(the cluster's logs: {self.root / 'log'})"]
        shutil.rmtree(self.root, ignore_errors=True)
        return []

    # ----- jobs -----------------------------------------------------------------------------

    def sbatch(
        self, script_path: str | os.PathLike[str], *args: str, cwd: str | None = None
    ) -> int:
        """Submit `script_path` with the sbatch options `args`; its job id. The job's working
        dir (its default `slurm-%j.out`) is `cwd`, or the cluster's `jobs/` dir."""
        assert self.root is not None, "start() the cluster first"
        out = self._run(
            "sbatch", "--parsable", *args, str(script_path), cwd=cwd or str(self.root / "jobs")
        )
        return int(out.stdout.strip().split(";")[0])

    def job(self, job_id: int | str) -> dict[str, str]:
        """The job's record (`scontrol show job -o`; a het job's: its component 0)."""
        out = self._run("scontrol", "show", "job", "-o", str(job_id), check=False)
        if out.returncode != 0:
            raise LookupError(f"job {job_id}: {out.stderr.strip() or out.stdout.strip()}")
        records = [parse_record(line) for line in out.stdout.splitlines() if line.strip()]
        for record in records:
            if record.get("JobId") == str(job_id):
                return record
        raise LookupError(f"job {job_id}: not in {out.stdout.strip()!r}")

    def state(self, job_id: int | str) -> str:
        """The job's JobState (PENDING, RUNNING, COMPLETED, CANCELLED, ...)."""
        return self.job(job_id)["JobState"]

    def wait_state(
        self, job_id: int | str, states: str | Iterable[str], timeout_s: float = 30.0
    ) -> str:
        """Wait until the job's state is one of `states`; that state. A final state not asked
        for (`FINAL_STATES`) or the timeout raises, with the job's record."""
        wanted = {states} if isinstance(states, str) else set(states)
        deadline = time.monotonic() + timeout_s
        while True:
            record = self.job(job_id)
            state = record["JobState"]
            if state in wanted:
                return state
            if state in FINAL_STATES:
                raise AssertionError(f"job {job_id} ended {state}, not {sorted(wanted)}: {record}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"job {job_id} still {state} (Reason={record.get('Reason')}) after "
                    f"{timeout_s:.0f} s, not {sorted(wanted)}; slurmctld: "
                    f"{self.log_tail('slurmctld')}"
                )
            time.sleep(0.2)

    def cancel(self, job_id: int | str, signal: str | None = None, batch: bool = False) -> None:
        """`scancel [--signal=SIG] [--batch] JOB` (`job_id` may be a step: "12.0")."""
        args = [f"--signal={signal}"] if signal else []
        args += ["--batch"] if batch else []
        self._run("scancel", *args, str(job_id))

    def scontrol(self, *args: str) -> str:
        """`scontrol ARGS` against this cluster; its stdout (a failure raises)."""
        return self._run("scontrol", *args).stdout

    def describe(self, job_id: int | str) -> str:
        """The job's record, each node's state and reason, and slurmctld's last lines: what a
        failing assertion about a job needs to say why it is stuck."""
        nodes = self._run("sinfo", "-N", "-h", "-o", "%N %T %E", check=False).stdout.strip()
        try:
            record = " ".join(f"{k}={v}" for k, v in self.job(job_id).items())
        except LookupError as error:
            record = str(error)
        return f"job: {record}\nnodes:\n{nodes}\nslurmctld:\n{self.log_tail('slurmctld', 20)}"

    def log_tail(self, name: str = "slurmctld", lines: int = 5) -> str:
        """The last lines of a daemon's log ("slurmctld", "slurmd-<node>", "munged")."""
        assert self.root is not None
        return _tail(self.root / "log" / f"{name}.log", lines) or _tail(
            self.root / "log" / f"{name}.out", lines
        )

    # ----- internals ------------------------------------------------------------------------

    def _write_config(self) -> None:
        assert self.root is not None
        for sub in ("etc", "run", "log", "state", "spool", "jobs", "munge"):
            (self.root / sub).mkdir(mode=0o755)
        key = os.open(
            self.root / "munge" / "munge.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400
        )
        with os.fdopen(key, "wb") as f:  # munged's own key, readable by root only
            f.write(os.urandom(1024))
        ctld_port, *slurmd_ports = free_ports(1 + self.node_count, low=20000)
        self._freezer = _freezer_mount()
        self.proctrack = "proctrack/cgroup" if self._freezer else "proctrack/linuxproc"
        r = self.root
        node_lines = "\n".join(
            f"NodeName={node} NodeHostname={self.hostname} NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={self.cpus} RealMemory=1000 State=UNKNOWN"
            for node, port in zip(self.nodes, slurmd_ports, strict=True)
        )
        conf = f"""\
ClusterName=agentgym
SlurmctldHost={self.hostname}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/run/munge.socket,cred_expire={self.cred_expire}
MpiDefault=none
MailProg=/bin/true
ProctrackType={self.proctrack}
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1
SlurmdParameters=config_overrides
JobRequeue=1
KillWait={self.kill_wait}
MinJobAge={self.min_job_age}
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
{node_lines}
PartitionName={self.partition} Nodes={self.node_expr} Default=YES MaxTime=INFINITE State=UP \
OverSubscribe=FORCE
"""
        self.conf = r / "etc" / "slurm.conf"
        self.conf.write_text(conf)
        if self._freezer:
            (r / "etc" / "cgroup.conf").write_text(
                f"CgroupPlugin=cgroup/v1\nCgroupMountpoint={self._freezer.parent}\n"
                "ConstrainCores=no\nConstrainRAMSpace=no\nConstrainSwapSpace=no\n"
                "ConstrainDevices=no\n"
            )
        plain = {k: v for k, v in os.environ.items() if not k.startswith(_CLIENT_ENV_PREFIXES)}
        self.env = {**plain, "SLURM_CONF": str(self.conf)}

    def _start_munged(self) -> None:
        assert self.root is not None
        r = self.root
        self._start_daemon(
            "munged",
            [
                self.bin["munged"],
                "--foreground",
                "--force",
                f"--key-file={r}/munge/munge.key",
                f"--socket={r}/run/munge.socket",
                f"--pid-file={r}/run/munged.pid",
                f"--seed-file={r}/munge/munged.seed",
                f"--log-file={r}/log/munged.log",
            ],
            "munged",
        )

        def munge_answers() -> bool:
            sock = r / "run" / "munge.socket"
            return (
                sock.exists()
                and self._run("munge", "-n", "-S", str(sock), check=False).returncode == 0
            )

        self._wait_for("munged answers", munge_answers)

    def _start_daemon(self, name: str, argv: list[str], log: str) -> None:
        assert self.root is not None
        out = self.root / "log" / f"{log}.out"
        with out.open("wb") as sink:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.root,
                start_new_session=True,
            )
        self._procs.append((name, proc, self.root / "log" / log))

    def _alive(self, name: str) -> bool:
        return any(n == name and p.poll() is None for n, p, _ in self._procs)

    def _wait_for(self, what: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            for name, proc, log in self._procs:
                if proc.poll() is not None:
                    why = _tail(log.with_suffix(".out"), 3) or _tail(log.with_suffix(".log"), 3)
                    raise ClusterUnavailable(
                        f"{name} exited with code {proc.returncode} during start-up: {why}"
                    )
            if ready():
                return
            if time.monotonic() > deadline:
                sinfo = self._run("sinfo", "-N", "-h", "-o", "%N %T", check=False).stdout
                raise ClusterUnavailable(
                    f"not ready after {self.start_timeout_s:.0f} s (waiting for {what}); "
                    f"sinfo: {sinfo.strip()!r}; slurmctld: {self.log_tail('slurmctld')}"
                )
            time.sleep(0.2)

    def _all_idle(self) -> bool:
        out = self._run("sinfo", "-N", "-h", "-o", "%N %T", check=False)
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        return all(states.get(node) == "idle" for node in self.nodes)

    def _run(
        self, command: str, *args: str, check: bool = True, cwd: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.bin.get(command, command), *args],
            env=self.env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"{command} {' '.join(args)} failed ({result.returncode}): "
                f"{result.stderr.strip() or result.stdout.strip()}"
            )
        return result

    def _cluster_pids(self) -> set[int]:
        """Processes of this cluster: its daemons, slurmstepds and job processes carry its
        SLURM_CONF; a job's processes are also in its freezer cgroups. Never this process or
        its ancestors."""
        spare = {0, 1}
        pid = os.getpid()
        while pid > 1:
            spare.add(pid)
            try:
                pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                break
        marker = f"SLURM_CONF={self.conf}".encode()
        found: set[int] = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                found.add(int(entry.name))
        for cgroup in self._cgroup_dirs():
            for tasks in cgroup.rglob("tasks"):
                try:
                    found.update(int(p) for p in tasks.read_text().split())
                except (OSError, ValueError):
                    pass
        return found - spare

    def _kill_leftovers(self) -> None:
        deadline = time.monotonic() + 10
        while (pids := self._cluster_pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)

    def _cgroup_dirs(self) -> list[Path]:
        if self._freezer is None:
            return []
        return [d for node in self.nodes if (d := self._freezer / f"slurm_{node}").is_dir()]

    def _remove_cgroups(self) -> None:
        for top in self._cgroup_dirs():
            for sub in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                if sub.is_dir():
                    try:
                        sub.rmdir()
                    except OSError:
                        pass
            try:
                top.rmdir()
            except OSError:
                pass

    @staticmethod
    def _cmdline(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            return "?"
