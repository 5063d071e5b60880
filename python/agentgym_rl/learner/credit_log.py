"""What each trained sample was trained with: per-turn advantages, joined to episodes by request id.

Contract. `trained_samples(groups, rows, advantages, loss_mask, step)` returns one
`TrainedSample` per row of a collated batch (`rows`: `batch.usable_samples(groups)`, in row
order; `advantages` and `loss_mask` the batch's `[B, S]` arrays): the sample's request id (`""`
from a writer that did not name it), group, task, env, reward and status, and the mean
advantage of its trained tokens per generated turn (turn spans are in token positions; the
batch is label-shifted, so the tokens of a span `[s, e)` are trained at positions
`s - 1 .. e - 2`; a turn with no trained token gets None), and, for a part of an episode that
trained as several samples (step-wise context), the episode's index of its first turn, and,
where given (`group_sizes`), each turn's step group size. `TrainedLog` appends them to
`<log_dir>/trained.jsonl` (data-parallel rank d > 0: `trained-dp<d>.jsonl`), one line per sample
with the step it was trained in; `read_trained(run_or_dir)` reads every such file of a run back
as a dict from request id to its records (a sample trained twice would show twice; a malformed
line raises `TrainedLogError` naming the file and line; a line still being written is skipped).
`turn_means(samples, bins)` gives the token-weighted sums and counts of advantage by the
episode's turn index (1-based; the last bin takes every later turn) for the learner's `adv_by_turn` metric.
Torch-free, so `show` reads the records without the learner's dependencies.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from agentgym_rl.wire.types import WireGroup, WireSample, turns_before

TRAINED_FILE = "trained.jsonl"
ADVANTAGE_DECIMALS = 4


@dataclass(frozen=True, slots=True)
class TrainedSample:
    """One sample of one optimizer step, as the learner trained it."""

    step: int
    request_id: str
    group_id: int
    task_id: str
    env: str
    reward: float
    status: str
    turn_advantages: list[float | None]
    turn_tokens: list[int]
    first_turn: int = 0
    """The episode's turn index of the sample's first turn (a step-wise part's place)."""
    turn_shared: list[int] | None = None
    """Per turn, how many turns of its group acted from its state, itself included (its step
    group, `step_credit.step_group_sizes`; 0: no state key). None: not recorded."""


def trained_samples(
    groups: Sequence[WireGroup],
    rows: Sequence[tuple[int, WireSample]],
    advantages: npt.NDArray[np.float32],
    loss_mask: npt.NDArray[np.float32],
    step: int,
    *,
    group_sizes: Sequence[Sequence[int]] | None = None,
) -> list[TrainedSample]:
    """The batch's rows with their per-turn advantages (see the module docstring)."""
    adv, mask = advantages, loss_mask
    out = []
    for row, ((index, s), before) in enumerate(zip(rows, turns_before(rows), strict=True)):
        means: list[float | None] = []
        counts: list[int] = []
        for start, end in s.tokens.turn_spans.tolist():
            lo, hi = max(start - 1, 0), max(end - 1, 0)
            m = mask[row, lo:hi] > 0
            n = int(m.sum())
            counts.append(n)
            value = float(adv[row, lo:hi][m].mean()) if n else None
            means.append(None if value is None else round(value, ADVANTAGE_DECIMALS))
        g = groups[index]
        out.append(
            TrainedSample(
                step,
                s.request_id,
                g.group_id,
                g.task_id,
                g.env,
                float(s.reward),
                s.status.value,
                means,
                counts,
                before,
                list(group_sizes[row]) if group_sizes is not None else None,
            )
        )
    return out


def turn_means(samples: Sequence[TrainedSample], bins: int) -> tuple[list[float], list[float]]:
    """Token-weighted advantage sums and token counts by turn index (bin k is turn k + 1)."""
    sums, counts = [0.0] * bins, [0.0] * bins
    for s in samples:
        pairs = zip(s.turn_advantages, s.turn_tokens, strict=True)
        for turn, (a, n) in enumerate(pairs, s.first_turn):
            if a is not None:
                k = min(turn, bins - 1)
                sums[k] += a * n
                counts[k] += n
    return sums, counts


class TrainedLog:
    """Appends `TrainedSample`s, one JSON line each, to a data-parallel rank's file."""

    def __init__(self, log_dir: str | Path, dp_rank: int = 0) -> None:
        name = TRAINED_FILE if dp_rank == 0 else f"trained-dp{dp_rank}.jsonl"
        self.path = Path(log_dir) / name

    def append(self, samples: Sequence[TrainedSample]) -> None:
        if not samples:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(asdict(s)) + "\n" for s in samples)
        with self.path.open("a") as f:
            f.write(text)


def trained_files(run_or_dir: str | Path) -> list[Path]:
    """A run folder's (or a learner log dir's) trained-sample logs."""
    root = Path(run_or_dir)
    return sorted(root.glob("trained*.jsonl")) + sorted(root.glob("learn*/trained*.jsonl"))


class TrainedLogError(ValueError):
    """A trained-sample log has a malformed line."""


def _records(paths: Sequence[Path]) -> Iterator[TrainedSample]:
    for path in paths:
        with path.open() as f:
            for n, line in enumerate(f, 1):
                if not line.endswith("\n"):  # a line being written is read next time
                    continue
                try:
                    yield TrainedSample(**json.loads(line))
                except (ValueError, TypeError) as e:
                    raise TrainedLogError(f"{path}, line {n}: not a trained sample ({e})") from None


def read_trained(run_or_dir: str | Path) -> dict[str, list[TrainedSample]]:
    """Every trained sample of a run, by request id (unnamed samples are left out)."""
    by_id: dict[str, list[TrainedSample]] = {}
    for s in _records(trained_files(run_or_dir)):
        if s.request_id:
            by_id.setdefault(s.request_id, []).append(s)
    return by_id


def adv_by_turn(sums: Sequence[float], counts: Sequence[float]) -> dict[str, float]:
    """The `adv_by_turn` metric: mean advantage of trained tokens by turn index (1-based)."""
    return {
        str(k + 1): round(s / n, ADVANTAGE_DECIMALS)
        for k, (s, n) in enumerate(zip(sums, counts, strict=True))
        if n
    }
