#!/usr/bin/env bash
# Installs everything and runs every check CI runs: Rust format, lints and tests, Python lint,
# type check, stub check and tests. README's test command; .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# each step's wall time is printed when the next begins (and the last one's at exit): where CI's
# time goes, read from its log
CURRENT=""
STARTED=$SECONDS
# and how busy the machine's cores were meanwhile (Linux): a share well under 100% during pytest
# says its workers wait more than they compute
busy() { [[ -r /proc/stat ]] && awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat || echo "0 0"; }
took() {
  [[ -z $CURRENT ]] && return 0
  local now; now=$(busy)
  awk -v a="$BUSY" -v b="$now" -v name="$CURRENT" -v s=$((SECONDS - STARTED)) 'BEGIN {
    split(a, x, " "); split(b, y, " "); used = y[1] - x[1]; all = used + y[2] - x[2]
    share = all > 0 ? sprintf(", cores %d%% busy", 100 * used / all) : ""
    printf "\033[1m== %s: %d s%s\033[0m\n", name, s, share }'
}
step() { took; CURRENT=$*; STARTED=$SECONDS; BUSY=$(busy); printf '\n\033[1m== %s\033[0m\n' "$*"; }
trap 'took; printf "\033[1m== all steps: %d s\033[0m\n" $SECONDS' EXIT

step "install"
scripts/install.sh --dev

step "cargo fmt --check"
cargo fmt --all --check
step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
step "cargo test"
cargo test --workspace
step "cargo test --benches (each criterion bench once, in test mode)"
cargo test --workspace --benches

step "ruff"
ruff check python tests benches envs scripts
ruff format --check python tests benches envs scripts
step "mypy (python/agentgym_rl and envs/agentgym_envs; strict on configs, wire, commands)"
"$PY" -m mypy
step "stubtest (agentgym_rl._core against its .pyi)"
"$PY" -m mypy.stubtest agentgym_rl._core --ignore-disjoint-bases --allowlist scripts/stubtest-allowlist.txt

step "pytest"
# two workers (tests/workers.py): a process test mostly waits on children starting, so two at
# once keep 2 cores busy; TEST_WORKERS=0 runs them one at a time. Every test of 5 s or more is
# listed by its time at the end: where the suite's time goes. Two workers' processes oversubscribe
# the cores by design, so OpenMP threads (torch's, in the tests' own processes) sleep at a barrier
# rather than spin for a descheduled peer (the engines do so anyway: inference/engine.py).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
"$PY" -m pytest -m "not gpu and not extended" -n "${TEST_WORKERS:-2}" --durations=0 --durations-min=5 "$@"
