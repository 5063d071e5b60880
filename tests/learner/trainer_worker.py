"""torchrun worker: two trainer steps with tp 2, then with dp 2, on the same fixed groups.

Rank 0 feeds the groups through `Trainer.next_groups` (a list-backed receiver), which deals
them to the data-parallel ranks. Rank 0 saves the HF-named weights after each layout.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
from trainer_fixtures import learn_config, make_group

from agentgym_rl.learner.convert import export_hf_weights
from agentgym_rl.learner.trainer import Trainer
from agentgym_rl.wire import encode_group

STEPS = 2
GROUPS_PER_STEP = 4


def payloads(vocab: int) -> list[bytes]:
    return [
        encode_group(make_group(g, vocab=vocab, seed=s))
        for s in range(STEPS)
        for g in range(GROUPS_PER_STEP)
    ]


class ListReceiver:
    def __init__(self, items: list[bytes]) -> None:
        self.items = list(items)

    def recv(self, timeout_s: float = 1.0) -> tuple[str, bytes] | None:
        return ("list", self.items.pop(0)) if self.items else None


def train(model: Path, tmp: Path, vocab: int, tp: int, dp: int) -> dict[str, Any]:
    """`STEPS` steps through `next_groups`; HF weights (every rank calls: collective)."""
    cfg = learn_config(model, tmp, groups_per_step=GROUPS_PER_STEP, parallel={"tp": tp, "dp": dp})
    trainer = Trainer(cfg, receiver=ListReceiver(payloads(vocab)))
    for _ in range(STEPS):
        groups = trainer.next_groups()
        assert groups is not None and len(groups) == GROUPS_PER_STEP // dp
        trainer.train_step(groups)
    weights = {k: v.clone() for k, v in export_hf_weights(trainer.model, trainer.spec).items()}
    trainer.close(keep_process_group=True)
    return weights


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--vocab", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    results = {
        "tp2": train(args.model, args.out.parent / "tp2", args.vocab, tp=2, dp=1),
        "dp2": train(args.model, args.out.parent / "dp2", args.vocab, tp=1, dp=2),
    }
    if torch.distributed.get_rank() == 0:
        torch.save(results, args.out)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
