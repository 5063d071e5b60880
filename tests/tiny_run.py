"""The smallest `train` config that runs end to end: the tiny model, one BabyAI env server, one
rollout server, one learner, two groups of two episodes a step (shared by the train, chaos and
wheel tests)."""

from __future__ import annotations

from typing import Any

SPLIT = "envs/agentgym_envs/babyai/data/train.json"
"""As configs name it; resolved from any directory (`env_discovery.shipped_path`)."""


def tiny_train_config(run_dir: str, model: str, *, max_steps: int = 2) -> dict[str, Any]:
    return {
        "run_dir": run_dir,
        "model": model,
        "env_servers": [{"env": "babyai", "replicas": 1, "transport": "zmq"}],
        "rollout_servers": 1,
        "learner_procs": 1,
        "groups_per_step": 2,
        "rollout": {
            "engine": {
                "temperature": 1.0,
                "dtype": "float32",  # the learner trains the tiny model in fp32
                "max_model_len": 1024,
                "max_tokens_per_turn": 40,
                "gpu_memory_utilization": 0.3,
            },
            "dataset": {"env": "babyai", "split": SPLIT, "group_size": 2},
            "scaling_inter": {"turn_caps": [3]},
            "buffer": {"max_in_flight": 4, "max_ready": 4},
            "status_interval_s": 1.0,
        },
        "learn": {
            "max_steps": max_steps,
            "optimizer": {"warmup_steps": 0},
            # one row per micro-batch: the learner's padded rows currently fail its RoPE
            # position check (learner/batch.py gives padding position 0)
            "micro_batch_tokens": 1,
            # the fused SwiGLU compiles per learner process and per new shape (~14 s of a
            # tiny run's first step on 2 cores, for a kernel that saves nothing at this size);
            # tests/supervise/test_train_e2e.py keeps it on through real processes
            "fused_swiglu": False,
        },
        "stop_grace_s": 30.0,
    }
