"""The learner: Megatron-core policy models trained on rollouts.

- `cpu_support`: the CPU stand-ins Megatron-core needs without CUDA (no-op on GPU).
- `model`: parallel setup, `GPTModel` from HF Qwen2/Llama configs, per-token log-probs.
- `convert`: HF <-> Megatron weights and gradients, tensor-parallel aware.
- `batch`, `advantages`, `losses`: training tensors, advantages and the policy loss.

This package file imports nothing; torch and megatron load with the submodules.
"""
