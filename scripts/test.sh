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
took() { [[ -n $CURRENT ]] && printf '\033[1m== %s: %d s\033[0m\n' "$CURRENT" $((SECONDS - STARTED)); true; }
step() { took; CURRENT=$*; STARTED=$SECONDS; printf '\n\033[1m== %s\033[0m\n' "$*"; }
# a failed install ends the Rust checks begun beside it (cargo, and the rustc jobs it waits on)
tree() { local c; for c in $(pgrep -P "$1"); do tree "$c"; done; echo "$1"; }
# shellcheck disable=SC2046
stop_rust() { [[ -n ${RUST_PID:-} ]] && kill $(tree "$RUST_PID") 2>/dev/null; true; }
trap 'stop_rust; took; printf "\033[1m== all steps: %d s\033[0m\n" $SECONDS' EXIT

# The Rust checks need cargo alone: they run beside the install, whose pip steps mostly wait on
# downloads, and their log is printed once the install is done
RUST_LOG=$(mktemp)
rust_checks() {
  set -e
  local began=$SECONDS
  timed() { local t=$SECONDS; printf '\n\033[1m== %s\033[0m\n' "$*"; "$@"; printf '\033[1m== %s: %d s\033[0m\n' "$*" $((SECONDS - t)); }
  timed cargo fmt --all --check
  timed cargo clippy --workspace --all-targets -- -D warnings
  timed cargo test --workspace
  # each criterion bench once, in test mode
  timed cargo test --workspace --benches
  printf '\033[1m== Rust checks: %d s (beside the install)\033[0m\n' $((SECONDS - began))
}
rust_checks >"$RUST_LOG" 2>&1 &
RUST_PID=$!

step "install"
scripts/install.sh --dev

step "Rust checks: cargo fmt, clippy, test, benches (begun beside the install)"
RUST_OK=1
wait "$RUST_PID" || RUST_OK=0
RUST_PID=""
if [[ $RUST_OK == 0 ]]; then
  cat "$RUST_LOG"; rm -f "$RUST_LOG"
  echo "Rust checks failed (above)" >&2
  exit 1
fi
cat "$RUST_LOG"; rm -f "$RUST_LOG"

step "ruff"
ruff check python tests benches envs scripts
ruff format --check python tests benches envs scripts
step "mypy (python/agentgym_rl and envs/agentgym_envs; strict on configs, wire, commands)"
"$PY" -m mypy
step "stubtest (agentgym_rl._core against its .pyi)"
"$PY" -m mypy.stubtest agentgym_rl._core --ignore-disjoint-bases --allowlist scripts/stubtest-allowlist.txt

step "pytest"
"$PY" -m pytest -m "not gpu and not extended" --durations=30 "$@"
