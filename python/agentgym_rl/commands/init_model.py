"""`agentgym-rl init-model`: create the default policy locally (tokenizer, model, format warm-up).

Only argparse runs at parse time; torch and transformers are imported by `run`.
Exit codes: 0 done, 2 bad arguments or an output folder that is not empty (without --force).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from agentgym_rl.model.init_options import InitOptions

_DEFAULTS = InitOptions(out=Path("."))

NAME = "init-model"
HELP = "create the default policy locally: tokenizer, small Qwen2, format warm-up"
DESCRIPTION = (
    "Plays training tasks with random valid actions, trains a BPE tokenizer on the "
    "environment's text, writes a small Qwen2-architecture checkpoint (head dim 64) and "
    "teaches it the action format by next-token training on those random-action "
    "transcripts (no expert data). Any HF checkpoint folder can be used in its place."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = _DEFAULTS
    parser.add_argument("--out", type=Path, required=True, help="checkpoint folder to create")
    parser.add_argument("--env", default=d.env, help="environment whose text and tasks to use")
    parser.add_argument(
        "--split",
        type=Path,
        help="training split the random-action transcripts are played on "
        "(default: babyai GoTo family, textcraft train)",
    )
    parser.add_argument(
        "--transcripts",
        type=int,
        default=d.transcripts,
        help="random-action episodes to play (the split is replayed when it has fewer tasks)",
    )
    parser.add_argument("--max-turns", type=int, default=d.max_turns, help="turns per transcript")
    parser.add_argument(
        "--system-prompt",
        help="system prompt of the transcripts: use the one the rollout config gives the env "
        "(default: the env's built-in prompt)",
    )
    parser.add_argument(
        "--env-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an env option, as `env serve --env-option` (e.g. observation=compact): use the "
        "ones the env servers of the run get",
    )
    parser.add_argument("--vocab-size", type=int, default=d.vocab_size, help="BPE vocabulary")
    parser.add_argument(
        "--phrase-tokens",
        action=argparse.BooleanOptionalAction,
        default=d.phrase_tokens,
        help="add the multiword tokens a superword BPE learns on the transcripts (e.g. 'go to "
        "red ball'): a tiny model copies an object as one token sooner than word by word",
    )
    parser.add_argument("--hidden", type=int, default=d.hidden, help="hidden size")
    parser.add_argument("--layers", type=int, default=d.layers, help="transformer layers")
    parser.add_argument("--heads", type=int, default=d.heads, help="attention heads (dim 64)")
    parser.add_argument("--kv-heads", type=int, default=d.kv_heads, help="key/value heads")
    parser.add_argument("--intermediate", type=int, default=d.intermediate, help="MLP size")
    parser.add_argument(
        "--warmup-steps", type=int, default=d.warmup_steps, help="format warm-up AdamW steps"
    )
    parser.add_argument("--warmup-batch", type=int, default=d.warmup_batch, help="transcripts/step")
    parser.add_argument("--warmup-lr", type=float, default=d.warmup_lr, help="warm-up peak lr")
    parser.add_argument(
        "--warmup-observation-weight",
        type=float,
        default=d.warmup_observation_weight,
        metavar="W",
        help="train on the observation turns too, each token weighing W against an action "
        "token (a dense copy task: the listed actions spell the labels the observation names); "
        "0: only the actions (default %(default)s)",
    )
    parser.add_argument(
        "--thought-line",
        metavar="PREFIX",
        help="each transcript action follows a 'Thought:' line restating the observation's line "
        "that starts with PREFIX (e.g. 'Goal:'); the actions stay random",
    )
    parser.add_argument("--seed", type=int, default=d.seed, help="seed of everything")
    parser.add_argument(
        "--threads",
        type=int,
        help="CPU threads of the warm-up (default: torch's; 1 is faster on a busy 2-core box)",
    )
    parser.add_argument(
        "--force",
        action=argparse.BooleanOptionalAction,
        default=d.force,
        help="replace a non-empty --out folder",
    )


def _pairs(items: list[str]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"init-model: --env-option {item!r}: expected KEY=VALUE")
        out.append((key.strip(), value.strip()))
    return out


def run(args: argparse.Namespace) -> int:
    options = InitOptions(
        out=args.out,
        env=args.env,
        split=args.split,
        transcripts=args.transcripts,
        max_turns=args.max_turns,
        system_prompt=args.system_prompt,
        env_options=tuple(_pairs(args.env_option)),
        vocab_size=args.vocab_size,
        phrase_tokens=args.phrase_tokens,
        hidden=args.hidden,
        layers=args.layers,
        heads=args.heads,
        kv_heads=args.kv_heads,
        intermediate=args.intermediate,
        warmup_steps=args.warmup_steps,
        warmup_batch=args.warmup_batch,
        warmup_lr=args.warmup_lr,
        warmup_observation_weight=args.warmup_observation_weight,
        thought_line=args.thought_line,
        seed=args.seed,
        threads=args.threads,
        force=args.force,
    )
    for name in ("transcripts", "max_turns", "warmup_steps", "warmup_batch", "hidden", "layers"):
        if getattr(options, name) < 1:
            print(f"init-model: --{name.replace('_', '-')} must be at least 1")
            return 2
    if not 0.0 <= options.warmup_observation_weight <= 1.0:
        print("init-model: --warmup-observation-weight must be between 0 and 1")
        return 2
    if options.out.exists() and any(options.out.iterdir()) and not options.force:
        print(f"init-model: {options.out} is not empty; pass --force to replace it")
        return 2
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from agentgym_rl.model.init_policy import init_policy

    console = Console()
    with Progress(
        TextColumn("warm-up"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} loss {task.fields[loss]:.3f}"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as progress:
        bar = progress.add_task("warm-up", total=options.warmup_steps, loss=float("nan"))
        every = max(1, options.warmup_steps // 10)
        started = time.perf_counter()

        def on_step(step: int, loss: float) -> None:
            progress.update(bar, completed=step, loss=loss)
            if not console.is_terminal and step % every == 0:  # a log file: a line per 10 %
                elapsed = time.perf_counter() - started
                console.print(
                    f"warm-up step {step}/{options.warmup_steps} loss {loss:.3f} ({elapsed:.0f} s)"
                )

        try:
            record = init_policy(
                options,
                say=console.print,
                on_step=on_step,
            )
        except (ValueError, FileExistsError) as e:  # bad split, unknown env, non-empty --out
            console.print(f"init-model: {e}")
            return 2
    console.print(
        f"policy written to {options.out} (random-action success "
        f"{record['random_action_success']:.2f}, warm-up loss {record['warmup_loss_first']:.3f}"
        f" -> {record['warmup_loss_last']:.3f}, {record['wall_s']:.0f} s)"
    )
    return 0
