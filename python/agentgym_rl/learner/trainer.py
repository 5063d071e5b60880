"""The learner loop: groups in, one AdamW step per `groups_per_step` groups, weights out.

Contract. One optimizer step (`train_step`) on the groups of this data-parallel rank:
collate (`batch.collate`, right-padded to a multiple of tp) -> advantages
(`advantages.compute_advantages`: group estimators see whole groups on each rank; REINFORCE++
whitening is global, its statistics summed over data-parallel ranks) -> proximal
log-probs: the detached log-probs of each micro-batch's own forward (one optimizer step per
batch, so they come from the weights before the update; `recompute_proximal` adds a separate
no-grad pass, same numbers) at the engine's temperature -> micro-batches
(`Batch.split(micro_batch_tokens)`) forward/backward with the loss normalised by the whole
step's token/sequence count summed over data-parallel ranks (gradient accumulation gives the
step's loss exactly) -> gradients summed over data-parallel ranks (and tied embeddings over
the first and last pipeline stage) -> global-norm clip -> AdamW step -> schedule step ->
policy version + 1. Every forward goes through `pipeline.run_stages`: with pp > 1 a GPipe
schedule over the stages, the loss and its metrics on the last stage (broadcast to the
others); with pp = 1 each micro-batch's backward right after its forward. `train_step` reads as
those stages, one named method each; the model passes are `passes.Passes`.

With `loss.kl_coef > 0` a frozen reference policy (the starting checkpoint `config.model`, same
parallel layout, eval mode, no gradients, never updated or checkpointed: a resumed run rebuilds
it from `config.model`) gives each micro-batch's reference log-probs without grad at the same
temperature (`ref_logprobs` of `policy_loss`, metric `kl_ref`). With `loss.entropy_coef != 0`
(or `loss.track_entropy`, or on a step the token log records) the micro-batch forward also
returns the per-token entropy of softmax(logits / temperature) (`model.token_logprobs_and_entropy`,
tensor-parallel aware), passed as `entropy` (metric `entropy`).

With `precision: bf16` every model forward (policy, proximal, reference) runs under bf16
autocast; parameters, gradients, AdamW state, log-softmax and loss stay fp32.

`run` repeats: `next_groups` (`source.GroupSource`: global rank 0 receives through
`GroupIntake`, validating and dropping stale groups against the current version, and deals
`groups_per_step / dp` groups to each data-parallel rank; while nothing arrives it logs a warning
every `source.IDLE_WARN_S` seconds, and after `receive.idle_timeout_s` of silence every rank
checkpoints and `run` raises `IdleTimeout`), `train_step`, the ledger's `used` record of the
step's groups, `publish` every `weights.every_steps` steps (HF names
via `export_hf_weights`; never waits past `weights.timeout_s`), one JSONL record per step in
`log_dir/metrics.jsonl` (rank 0; `adv_by_turn` gives the mean advantage of trained tokens by
turn index), each trained sample's request id and per-turn advantages in
`log_dir/trained.jsonl` (`credit_log`), with `token_log` a few samples' per-token log-probs,
entropies and weights in `log_dir/tokens.jsonl` (`token_log`; metric `token_log_bytes`), and a
checkpoint every `checkpoint.every_steps` steps.
Policy version = optimizer steps taken; the starting weights are version 0.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from megatron.core import parallel_state
from safetensors.torch import load_file
from transformers import AutoConfig

from agentgym_rl.config.learn import LearnConfig
from agentgym_rl.learner import host_heap, lora
from agentgym_rl.learner import model as lm
from agentgym_rl.learner.advantages import compute_advantages, scale_per_env
from agentgym_rl.learner.batch import Batch, collate, usable_samples
from agentgym_rl.learner.convert import (
    ConvertSpec,
    export_hf_adapters,
    export_hf_weights,
    load_hf_weights,
)
from agentgym_rl.learner.credit_log import TrainedLog, adv_by_turn, trained_samples, turn_means
from agentgym_rl.learner.intake import GroupIntake
from agentgym_rl.learner.links import GroupInbox, Ledger, WeightOutbox
from agentgym_rl.learner.optim import (
    allreduce_embedding_grads,
    allreduce_grads,
    build_optimizer,
    clip_grads,
    lr_schedule,
)
from agentgym_rl.learner.passes import MicroTotals, Passes, StepCounts, micro_totals
from agentgym_rl.learner.source import GroupSource
from agentgym_rl.learner.step_credit import (
    RowTurns,
    add_step_credit,
    shared_state_share,
    shared_state_share_by_turn,
    step_group_sizes,
    turns_of,
)
from agentgym_rl.learner.token_capture import StepTokens
from agentgym_rl.learner.token_log import TokenLog, pick_rows
from agentgym_rl.wire import WireGroup, WireSample

log = logging.getLogger(__name__)
# turn indexes of the `adv_by_turn` metric (later turns count in the last)
_TURN_BINS = 32


class IdleTimeout(RuntimeError):
    """No usable group arrived for `receive.idle_timeout_s`; the trainer checkpointed and
    stopped."""


def load_hf_state_dict(model_dir: Path) -> dict[str, torch.Tensor]:
    """Every `*.safetensors` file of an HF checkpoint directory, merged."""
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{model_dir} has no *.safetensors weights")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    return state


class Trainer:
    """One learner process (rank) of a possibly tp x pp x dp torchrun job."""

    def __init__(
        self,
        config: LearnConfig,
        *,
        receiver: GroupInbox | None = None,
        publisher: WeightOutbox | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        """`receiver`, `publisher` and `ledger` are rank 0's links (`learner/links.py`); other
        ranks and tests without a stream leave them out."""
        self.config = config
        par = config.parallel
        self.layout = lm.init_parallel(tp=par.tp, pp=par.pp, seed=config.seed)
        if self.layout.dp_size != par.dp:
            raise ValueError(
                f"world size {self.layout.world_size} gives dp={self.layout.dp_size}, "
                f"config says parallel.dp={par.dp}"
            )
        self.device = torch.device("cpu" if not torch.cuda.is_available() else "cuda")
        self._host_heap = self.device.type == "cpu" and host_heap.bound_heap()
        self.hf_config = AutoConfig.from_pretrained(str(config.model))
        torch.manual_seed(config.seed)
        self.model = lm.build_gpt_model(self.hf_config, fused_swiglu=config.fused_swiglu)
        self.spec = ConvertSpec.from_hf(self.hf_config, par.tp, self.model.vocab_size)
        initial = load_hf_state_dict(config.model)
        load_hf_weights(self.model, initial, self.spec)
        if config.lora is not None:
            lora.add_adapters(
                self.model,
                config.lora.rank,
                config.lora.alpha,
                config.lora.targets,
                config.lora.dropout,
            )
        # with adapters the reference is the base itself, adapters off: no second copy
        wants_ref = config.loss.kl_coef > 0.0 and config.lora is None
        self.ref_model = self._build_reference(initial) if wants_ref else None
        del initial
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = build_optimizer(self.model, config.optimizer)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_schedule(config.optimizer, config.max_steps)
        )
        self.intake = GroupIntake(self.hf_config.vocab_size, config.max_staleness, ledger)
        self.source = GroupSource(config, self.layout, self.intake)
        self.receiver = receiver
        self.publisher = publisher
        self.step = 0
        self.autocast = torch.bfloat16 if config.precision == "bf16" else None
        self.passes = Passes(
            self.device, config.temperature, self.autocast, self.hf_config.hidden_size
        )
        self._last_saved_step: int | None = None
        self.last_publish: Any = None
        self._metrics_path = Path(config.log_dir) / "metrics.jsonl"
        # one writer per data-parallel rank: every tp/pp rank of it holds the same advantages
        lay = self.layout
        self._trained_log = (
            TrainedLog(config.log_dir, lay.dp_rank)
            if lay.tp_rank == 0 and lay.pp_rank == 0
            else None
        )
        # the token log is written where the log-probs are: the last pipeline stage
        self._token_log = (
            TokenLog(config.log_dir, lay.dp_rank)
            if config.token_log is not None and lay.tp_rank == 0 and lay.pp_rank == lay.pp_size - 1
            else None
        )

    def _build_reference(self, initial: dict[str, torch.Tensor]) -> torch.nn.Module:
        """The frozen reference policy: the starting weights, eval mode, no gradients."""
        ref = lm.build_gpt_model(self.hf_config, fused_swiglu=self.config.fused_swiglu)
        load_hf_weights(ref, initial, self.spec)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    @property
    def version(self) -> int:
        return self.step

    @property
    def is_rank0(self) -> bool:
        return self.layout.rank == 0

    @property
    def idle_s(self) -> float | None:
        """Set when the last receive ended on `receive.idle_timeout_s`."""
        return self.source.idle_s

    def next_groups(self, stop: threading.Event | None = None) -> list[WireGroup] | None:
        """This rank's share of the next step's groups (None: stop; `idle_s` set on timeout)."""
        return self.source.next_groups(self.receiver, self.publisher, self.version, stop)

    # --- one step --------------------------------------------------------------------------
    def train_step(self, groups: list[WireGroup]) -> dict[str, Any]:
        """One optimizer step on this rank's `groups`; returns the step's metrics."""
        t0 = time.perf_counter()
        batch = collate(groups, pad_token_id=0, pad_multiple=self.config.parallel.tp)
        rows = usable_samples(groups)  # the batch's rows, in order
        turns = turns_of(rows)  # per row its turns, rewards and state keys (step credit's view)
        batch = self._with_advantages(batch, turns)
        credit = self._record_credit(groups, rows, batch, step_group_sizes(turns))
        micro = batch.split(self.config.micro_batch_tokens, self.config.micro_batch_overhead_tokens)
        counts = self._step_counts(batch, micro)
        refs = self._reference_logprobs(micro)
        self.model.train()
        proximal = self._proximal_logprobs(micro)
        self.optimizer.zero_grad(set_to_none=True)
        tokens = self._token_keeper(rows)
        results = self.passes.loss_and_backward(
            micro, refs, proximal, self.model, self.config.loss, counts, keep=tokens
        )
        totals = micro_totals(results)
        grad_norm, lr = self._optimizer_step()
        if self._host_heap:
            host_heap.release_free_memory()
        elapsed = time.perf_counter() - t0
        metrics = self._step_metrics(batch, counts, totals, grad_norm, lr, len(micro), elapsed)
        metrics["adv_by_turn"] = credit
        if tokens is not None and self._token_log is not None:
            metrics["token_log_bytes"] = self._token_log.append(tokens.records)
        share = shared_state_share(turns)
        if share is not None:  # what step-level credit could compare (logged with it or not)
            metrics["step_group_share"] = share
            metrics["step_group_share_by_turn"] = shared_state_share_by_turn(turns, _TURN_BINS)
        return metrics

    def _with_advantages(self, batch: Batch, turns: list[RowTurns]) -> Batch:
        """`batch` with per-token advantages (REINFORCE++ whitening summed over dp ranks), and
        step-level credit on top when configured (`step_credit`)."""
        adv = self.config.advantage
        advantages = compute_advantages(
            adv.estimator,
            batch.rewards,
            batch.group_ids,
            batch.loss_mask,
            eps=adv.eps,
            gamma=adv.gamma,
            unbiased_std=adv.unbiased_std,
            dp_sum=self._dp_reduce if self.layout.dp_size > 1 else None,
            episode_ids=batch.episode_ids,
        )
        if adv.step is not None and adv.step.weight > 0:
            advantages = add_step_credit(
                advantages,
                batch.loss_mask,
                turns,
                adv.step,
                eps=adv.eps,
                unbiased_std=adv.unbiased_std,
            )
        if adv.per_env_scale:
            advantages = scale_per_env(advantages, batch.env_ids, batch.loss_mask, adv.eps)
        return replace(batch, advantages=advantages)

    def _token_keeper(self, rows: list[tuple[int, WireSample]]) -> StepTokens | None:
        """The token log's keeper on a logged step (every rank of the last stage computes the
        entropies, a tensor-parallel collective; tensor rank 0 writes)."""
        log = self.config.token_log
        step = self.step + 1
        if log is None or step % log.every_steps:
            return None
        picked = pick_rows(len(rows), log.samples_per_step, step)
        return StepTokens(self.config.loss, step, {r: rows[r][1].request_id for r in picked})

    def _record_credit(
        self,
        groups: list[WireGroup],
        rows: list[tuple[int, WireSample]],
        batch: Batch,
        sizes: list[list[int]],
    ) -> dict[str, float]:
        """Log what each sample trains with (`credit_log`, with each turn's step group `sizes`);
        returns the step's mean advantage of trained tokens by turn index, over every
        data-parallel rank."""
        assert batch.advantages is not None
        adv, mask = batch.advantages.detach().cpu().numpy(), batch.loss_mask.cpu().numpy()
        samples = trained_samples(groups, rows, adv, mask, self.step + 1, group_sizes=sizes)
        if self._trained_log is not None:
            self._trained_log.append(samples)
        sums, counts = turn_means(samples, _TURN_BINS)
        reduced = self._dp_sum([*sums, *counts])
        return adv_by_turn(reduced[:_TURN_BINS], reduced[_TURN_BINS:])

    def _step_counts(self, batch: Batch, micro: list[Batch]) -> StepCounts:
        """The step's loss tokens, sequences, real and computed tokens, summed over dp ranks."""
        computed = sum(mb.input_ids.numel() for mb in micro)
        sizes = [batch.num_loss_tokens, batch.num_seqs, float(batch.lengths.sum()), computed]
        return StepCounts(*self._dp_sum(sizes))

    def _reference_logprobs(self, micro: list[Any]) -> list[Any]:
        """The frozen reference's log-probs per micro-batch (None each without `kl_coef`)."""
        if self.config.loss.kl_coef > 0.0 and self.config.lora is not None:
            with lora.adapters_disabled(self.model):
                return self.passes.logprobs(micro, self.model)
        if self.ref_model is None:
            return [None] * len(micro)
        return self.passes.logprobs(micro, self.ref_model)

    def _proximal_logprobs(self, micro: list[Any]) -> list[Any]:
        """Proximal log-probs per micro-batch: None each (the training forward's own, detached:
        one optimizer step per batch, so every micro-batch's forward runs on the pre-update
        weights), or with `recompute_proximal` a separate no-grad pass, the same numbers at a
        third of the step's cost."""
        if not self.config.recompute_proximal:
            return [None] * len(micro)
        return self.passes.logprobs(micro, self.model)

    def _optimizer_step(self) -> tuple[float, float]:
        """Reduce gradients, clip, AdamW and schedule step; returns (grad norm, lr used)."""
        allreduce_grads(self.params)
        allreduce_embedding_grads(self.model)
        grad_norm = clip_grads(self.params, self.config.optimizer.grad_clip)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        return grad_norm, lr

    def _step_metrics(
        self,
        batch: Batch,
        counts: StepCounts,
        totals: MicroTotals,
        grad_norm: float,
        lr: float,
        micro_batches: int,
        elapsed: float,
    ) -> dict[str, Any]:
        local_tokens = max(float(batch.num_loss_tokens), 1.0)
        (loss_sum,) = self._dp_sum([totals.loss])
        metrics = {k: v / local_tokens for k, v in totals.sums.items()}
        metrics.update(
            time=time.time(),
            step=self.step,
            version=self.version,
            loss=loss_sum,
            tis_weight_max=totals.tis_max,
            grad_norm=grad_norm,
            lr=lr,
            tokens=int(counts.tokens),
            loss_tokens=int(counts.loss_tokens),
            computed_tokens=int(counts.computed),
            # what the forward and backward passes spent on real tokens, and on trained ones
            real_token_share=counts.tokens / max(counts.computed, 1.0),
            trained_token_share=counts.loss_tokens / max(counts.computed, 1.0),
            tokens_per_s=counts.tokens / elapsed,
            step_s=elapsed,
            micro_batches=micro_batches,
            reward_mean=float(batch.rewards.mean()) if len(batch) else 0.0,
            samples_excluded=sum(batch.excluded.values()),
        )
        return metrics

    def _dp_reduce(self, t: torch.Tensor) -> torch.Tensor:
        """The sum of `t` over data-parallel ranks (a new tensor)."""
        out = t.to(self.device, copy=True)
        torch.distributed.all_reduce(out, group=parallel_state.get_data_parallel_group())
        return out.to(t.device)

    def _dp_sum(self, values: list[float]) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        if self.layout.dp_size > 1:
            group = parallel_state.get_data_parallel_group()
            torch.distributed.all_reduce(t, group=group)
        return [float(v) for v in t.tolist()]

    # --- weights out, logs, loop -----------------------------------------------------------
    def publish(self) -> dict[str, Any]:
        """Export HF-named weights (collective) and, on rank 0, publish them (bounded wait)."""
        t0 = time.perf_counter()
        tensors = self._weights_out()
        out: dict[str, Any] = {}
        if self.is_rank0 and self.publisher is not None and self.config.weights is not None:
            # copies: the publisher sends views, and the next step updates parameters in place
            owned = {k: v.detach().clone() for k, v in tensors.items()}
            result = self.publisher.publish(self.version, owned, self.config.weights.timeout_s)
            self.last_publish = result
            out = {
                "publish_acked": len(result.acked),
                "publish_timed_out": len(result.timed_out),
                "publish_rerouted": len(result.rerouted),  # relays that failed a server
                "publish_mb": result.bytes_sent / 1e6,  # the learner's egress (one per root)
            }
        out["sync_s"] = time.perf_counter() - t0
        return out

    def _weights_out(self) -> dict[str, torch.Tensor]:
        """What an update carries: every HF weight, or with `learn.lora` the adapters alone
        under PEFT's names, B scaled by alpha / rank (the engine's adapter scale is 1)."""
        if self.config.lora is None:
            return export_hf_weights(self.model, self.spec)
        scale = self.config.lora.alpha / self.config.lora.rank
        return {
            name: t * scale if name.endswith(".lora_B.weight") else t
            for name, t in export_hf_adapters(self.model, self.spec).items()
        }

    def _offer_weights(self) -> None:
        """At start: make the weights this run is at available to rollout servers that join.
        A fresh run's are the starting weights every server loads itself; a resumed run's are
        published (rollout servers started from the base model catch up before generating)."""
        if self.step == 0:
            if self.is_rank0 and self.publisher is not None:
                self.publisher.announce(0)
            return
        result = self.publish()
        log.info("resumed at version %d: weights offered to rollout servers %s", self.step, result)

    def log_metrics(self, metrics: dict[str, Any]) -> None:
        counters = self.intake.counters()
        metrics.update(
            groups_received=counters["received"],
            groups_used=counters["used"],
            groups_dropped=counters["dropped_stale"],
            groups_rejected=sum(counters["rejected"].values()),
            rejected_reasons=counters["rejected"],
        )
        if self.is_rank0:
            self._metrics_path.parent.mkdir(parents=True, exist_ok=True)
            with self._metrics_path.open("a") as f:
                f.write(json.dumps(metrics) + "\n")
            log.info(
                "step %d loss %.4f clip %.3f mismatch_kl %.2e tok/s %.0f real/computed %.2f "
                "trained/computed %.2f",
                metrics["step"],
                metrics["loss"],
                metrics.get("clip_frac", 0.0),
                metrics.get("mismatch_kl", 0.0),
                metrics["tokens_per_s"],
                metrics["real_token_share"],
                metrics["trained_token_share"],
            )

    def _save(self) -> Path:
        from agentgym_rl.learner.checkpoint import save_checkpoint

        self._last_saved_step = self.step
        return save_checkpoint(self, self.config.checkpoint.dir)

    def _stop_idle(self) -> None:
        """Every rank: checkpoint (unless this step is saved already), then raise IdleTimeout."""
        saved = "already saved" if self._last_saved_step == self.step else str(self._save())
        raise IdleTimeout(
            f"no usable group for {self.idle_s:.0f} s: {self.intake.stall_reason(self.version)} "
            f"(receive.idle_timeout_s = {self.config.receive.idle_timeout_s}; "
            f"{self.source.idle_summary()}); checkpoint of step {self.step}: {saved}. Check that "
            f"the rollout servers are running and send to receive.bind = {self.config.receive.bind}, "
            "or raise receive.idle_timeout_s (null waits forever); --resume continues from here"
        )

    def run(self, stop: threading.Event | None = None) -> int:
        """Train until `max_steps` or `stop`; returns the number of steps taken in total.

        Raises `IdleTimeout` (on every rank, after checkpointing) when `receive.idle_timeout_s`
        passes without a group.
        """
        cfg = self.config
        if cfg.weights is not None:
            self._offer_weights()
        while self.step < cfg.max_steps:
            groups = self.next_groups(stop)
            if groups is None:
                if self.idle_s is not None:
                    self._stop_idle()
                if self.step > 0 and self._last_saved_step != self.step:  # SIGTERM: keep every step
                    self._save()
                break
            metrics = self.train_step(groups)
            self.source.record_used(self.step)
            metrics["sync_s"] = 0.0
            if cfg.weights is not None and self.step % cfg.weights.every_steps == 0:
                metrics.update(self.publish())
            self.log_metrics(metrics)
            if self.step % cfg.checkpoint.every_steps == 0 or self.step == cfg.max_steps:
                self._save()
        self.source.record_unsent()  # groups taken for a step the run ended before
        return self.step

    def close(self, *, keep_process_group: bool = False) -> None:
        lm.shutdown_parallel(keep_process_group=keep_process_group)
