"""A run's records as named scalars, the names verl and TRL users know, for metric sinks.

Contract: `learner_scalars(record)`, `rollout_scalars(record, server)` and
`eval_scalars(record, env)` map one record of `learn/metrics.jsonl`, `rollout-*/metrics.jsonl` and
`rollout-*/eval.jsonl` to `(tag, value)` pairs (`LEARNER_TAGS`, `ROLLOUT_TAGS`; keys a record lacks
are skipped). A `MetricSink` takes records as they arrive (the supervisor's watcher feeds every
record of the run, from the start on a resume): at the learner step a learner record carries,
at the version a rollout server was running, at the version an evaluation is of. Sinks:
`tensorboard.TensorBoardLog`, `wandb_run.WandbRun`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from agentgym_rl.report.records import number


class MetricSink(Protocol):
    """Where a run's scalars go besides its JSONL records."""

    def learner(self, record: dict[str, Any]) -> None: ...

    def rollout(self, record: dict[str, Any], server: str, step: int) -> None: ...

    def evaluation(self, record: dict[str, Any], env: str) -> None: ...

    def close(self) -> None: ...


LEARNER_TAGS = {
    "reward_mean": "train/reward_mean",
    "loss": "actor/loss",
    "pg_loss": "actor/pg_loss",
    "approx_kl": "actor/kl",
    "kl_ref": "actor/kl_ref",
    "entropy": "actor/entropy",
    "clip_frac": "actor/clip_frac",
    "grad_norm": "actor/grad_norm",
    "lr": "actor/lr",
    "mismatch_kl": "actor/mismatch_kl",
    "tis_weight_mean": "actor/tis_weight_mean",
    "tokens_per_s": "perf/tokens_per_s",
    "step_s": "perf/step_s",
    "real_token_share": "perf/real_token_share",
    "trained_token_share": "perf/trained_token_share",
    "groups_used": "buffer/groups_used",
    "groups_dropped": "buffer/groups_dropped",
    "groups_rejected": "buffer/groups_rejected",
    "step_group_share": "credit/step_group_share",
}
"""A learner record's key -> its tag (at the record's step)."""

ROLLOUT_TAGS = {
    "success_rate": "train/success",
    "reward_mean": "rollout/reward_mean",
    "turns_mean": "train/turns_mean",
    "generated_tokens_per_s": "perf/gen_tokens_per_s",
    "env_steps_per_s": "perf/env_steps_per_s",
    "episodes_per_s": "perf/episodes_per_s",
    "engine_idle_ratio": "perf/engine_idle_ratio",
}
"""A rollout server's record key -> its tag (at the learner step the record belongs to)."""


def learner_scalars(record: dict[str, Any]) -> Iterator[tuple[str, float]]:
    """`LEARNER_TAGS`, and by turn index the mean advantage of trained tokens
    (`credit/advantage_turn<k>`, from `adv_by_turn`) and the share of turns in step groups of
    two or more (`credit/step_group_share_turn<k>`, from `step_group_share_by_turn`)."""
    for key, tag in LEARNER_TAGS.items():
        value = number(record, key)
        if value is not None:
            yield tag, value
    for key, tag in (
        ("adv_by_turn", "advantage"),
        ("step_group_share_by_turn", "step_group_share"),
    ):
        by_turn = record.get(key)
        for turn, value in (by_turn if isinstance(by_turn, dict) else {}).items():
            if isinstance(value, int | float):
                yield f"credit/{tag}_turn{turn}", float(value)


def rollout_scalars(record: dict[str, Any], server: str) -> Iterator[tuple[str, float]]:
    """`server`'s figures; with more than one server each gets its own tag (`.../rollout-1`)."""
    suffix = "" if server == "rollout-0" else f"/{server}"
    for key, tag in ROLLOUT_TAGS.items():
        value = number(record, key)
        if value is not None:
            yield tag + suffix, value


def eval_scalars(record: dict[str, Any], env: str) -> Iterator[tuple[str, float]]:
    """Held-out success overall (`eval/success`, `eval/pass`) and of each env
    (`eval/<env>/success`) and its categories (`eval/<env>/<category>/success`) from an
    `eval.jsonl` record; a record without `by_env` is of `env` alone."""
    for key, tag in (("success", "eval/success"), ("pass", "eval/pass")):
        value = number(record, key)
        if value is not None:
            yield tag, value
    by_env = record.get("by_env")
    for name, figures in (by_env if isinstance(by_env, dict) else {env: record}).items():
        if not isinstance(figures, dict):
            continue
        value = number(figures, "success")
        if value is not None:
            yield f"eval/{name}/success", value
        categories = figures.get("by_category")
        for category, value in (categories if isinstance(categories, dict) else {}).items():
            if isinstance(value, int | float):
                yield f"eval/{name}/{category}/success", float(value)


__all__ = [
    "LEARNER_TAGS",
    "ROLLOUT_TAGS",
    "MetricSink",
    "eval_scalars",
    "learner_scalars",
    "rollout_scalars",
]
