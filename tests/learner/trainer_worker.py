"""torchrun worker: `STEPS` trainer steps per layout on the same fixed groups.

Layouts (`LAYOUTS`): tp 2, dp 2 (GRPO), dp 2 with REINFORCE++ (whitening global over the
data-parallel ranks) and pp 2 (GPipe over two stages), also with the KL loss. Rank 0 feeds the groups through `Trainer.next_groups` (a list-backed
receiver), which deals them to the data-parallel ranks. Rank 0 saves, per layout, the first
step's loss and gradients (HF names, summed over data-parallel ranks and clipped, as the
optimizer saw them) and the HF-named weights after the last step. `run_layout` is also what
the test runs in one process for the reference. Last, `idle_stop` checks that under dp 2 an
idle timeout on rank 0 stops every rank (checkpoint first, then `IdleTimeout` everywhere), and
a checkpoint one process saved (`--resume-from`) resumes under tp 2 and under pp 2
(`resume_one_step`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import torch
from trainer_fixtures import learn_config, make_group

from agentgym_rl.learner.checkpoint import load_checkpoint, save_checkpoint
from agentgym_rl.learner.checkpoint_dirs import latest_checkpoint
from agentgym_rl.learner.convert import export_hf_grads, export_hf_weights
from agentgym_rl.learner.trainer import IdleTimeout, Trainer
from agentgym_rl.wire import encode_group

STEPS = 2
GROUPS_PER_STEP = 4
LAYOUTS: dict[str, dict[str, Any]] = {
    "tp2": {"tp": 2, "dp": 1, "estimator": "grpo"},
    "dp2": {"tp": 1, "dp": 2, "estimator": "grpo"},
    "dp2_rpp": {"tp": 1, "dp": 2, "estimator": "reinforce_plus_plus"},
    # two stages of one layer each, tied embeddings, several micro-batches per step; with the
    # KL loss the frozen reference runs through the pipeline too
    "pp2": {"pp": 2, "dp": 1, "estimator": "grpo"},
    "pp2_kl": {"pp": 2, "dp": 1, "estimator": "grpo", "kl_coef": 0.1},
}


def payloads(vocab: int) -> list[bytes]:
    """Rewards differ in scale between groups, so per-rank REINFORCE++ whitening would differ."""
    return [
        encode_group(
            make_group(
                g, vocab=vocab, seed=s, rewards=[float((i + g) % 2) * (g + 1) for i in range(4)]
            )
        )
        for s in range(STEPS)
        for g in range(GROUPS_PER_STEP)
    ]


class ListReceiver:
    def __init__(self, items: list[bytes]) -> None:
        self.items = list(items)

    def recv(self, timeout_s: float = 1.0) -> tuple[str, bytes] | None:
        if self.items:
            return ("list", self.items.pop(0))
        time.sleep(min(timeout_s, 0.05))  # like a real receiver: wait a little, then None
        return None


def run_layout(
    model: Path,
    tmp: Path,
    vocab: int,
    *,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    estimator: str = "grpo",
    kl_coef: float = 0.0,
) -> dict[str, Any]:
    """`STEPS` steps through `next_groups`; every rank calls (the exports are collective)."""
    cfg = learn_config(
        model,
        tmp,
        groups_per_step=GROUPS_PER_STEP,
        parallel={"tp": tp, "pp": pp, "dp": dp},
        advantage={"estimator": estimator},
        loss={"kl_coef": kl_coef},
    )
    trainer = Trainer(cfg, receiver=ListReceiver(payloads(vocab)))
    out: dict[str, Any] = {}
    try:
        for step in range(STEPS):
            groups = trainer.next_groups()
            assert groups is not None and len(groups) == GROUPS_PER_STEP // dp
            metrics = trainer.train_step(groups)
            if step == 0:
                grads = export_hf_grads(trainer.model, trainer.spec)
                out["loss"] = metrics["loss"]
                out["grads"] = {k: v.clone() for k, v in grads.items()}
        weights = export_hf_weights(trainer.model, trainer.spec)
        out["weights"] = {k: v.clone() for k, v in weights.items()}
    finally:
        trainer.close(keep_process_group=True)
    return out


RESHARD = {"tp2": {"tp": 2}, "pp2": {"pp": 2}}
"""Layouts that resume a checkpoint one process saved (`--resume-from`)."""


def save_one_step(model: Path, tmp: Path, vocab: int) -> Path:
    """One process: one step on the first step's groups, checkpointed (what `reshard` loads)."""
    cfg = learn_config(model, tmp, groups_per_step=GROUPS_PER_STEP)
    trainer = Trainer(cfg, receiver=ListReceiver(payloads(vocab)))
    try:
        groups = trainer.next_groups()
        assert groups is not None
        trainer.train_step(groups)
        return save_checkpoint(trainer, cfg.checkpoint.dir)
    finally:
        trainer.close(keep_process_group=True)


def resume_one_step(
    model: Path, tmp: Path, vocab: int, checkpoint: Path, *, tp: int = 1, pp: int = 1
) -> dict[str, Any]:
    """Load `checkpoint` under tp x pp, take the second step; HF weights and first moments."""
    cfg = learn_config(
        model, tmp, groups_per_step=GROUPS_PER_STEP, parallel={"tp": tp, "pp": pp, "dp": 1}
    )
    trainer = Trainer(cfg, receiver=ListReceiver(payloads(vocab)[GROUPS_PER_STEP:]))
    try:
        load_checkpoint(trainer, checkpoint)
        loaded = {
            "step": trainer.step,
            "lr": trainer.optimizer.param_groups[0]["lr"],
            "weights": {
                k: v.clone() for k, v in export_hf_weights(trainer.model, trainer.spec).items()
            },
        }
        groups = trainer.next_groups()
        assert groups is not None
        trainer.train_step(groups)
        weights = export_hf_weights(trainer.model, trainer.spec)
        return {**loaded, "after": {k: v.clone() for k, v in weights.items()}}
    finally:
        trainer.close(keep_process_group=True)


def idle_stop(model: Path, tmp: Path, vocab: int) -> dict[str, Any]:
    """dp 2: one step's groups, then silence past `receive.idle_timeout_s`."""
    cfg = learn_config(
        model,
        tmp,
        groups_per_step=GROUPS_PER_STEP,
        parallel={"dp": 2},
        max_steps=STEPS + 1,
        receive={"idle_timeout_s": 1.0, "poll_s": 0.05},
    )
    trainer = Trainer(cfg, receiver=ListReceiver(payloads(vocab)[:GROUPS_PER_STEP]))
    raised = torch.zeros(1)
    try:
        trainer.run()
    except IdleTimeout:
        raised += 1
    torch.distributed.all_reduce(raised)  # every rank got here: none is stuck in a collective
    latest = latest_checkpoint(cfg.checkpoint.dir)
    out = {"ranks_raised": int(raised), "step": trainer.step, "checkpoint": latest}
    trainer.close(keep_process_group=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--vocab", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--resume-from", type=Path, required=True, help="see save_one_step")
    args = parser.parse_args()
    results = {
        name: run_layout(args.model, args.out.parent / name, args.vocab, **layout)
        for name, layout in LAYOUTS.items()
    }
    results["idle"] = idle_stop(args.model, args.out.parent / "idle", args.vocab)
    results["reshard"] = {
        name: resume_one_step(
            args.model, args.out.parent / f"reshard_{name}", args.vocab, args.resume_from, **layout
        )
        for name, layout in RESHARD.items()
    }
    if torch.distributed.get_rank() == 0:
        torch.save(results, args.out)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
