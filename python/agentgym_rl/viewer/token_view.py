"""The episode page's token view: each trained token with what the learner recorded of it.

Contract: `trained_tokens(rec, tokens, decode)` joins the learner's token records
(`learner.token_log.read_tokens`, by request id; an episode that trained as several samples has a
record per part, `part_id`) to the episode's trained positions: position -> `TOKEN_FIELDS` values
(the token's own text, decoded alone, then the learner's log-prob, the behaviour log-prob, the
entropy, the off-policy weight, PPO's ratio, 1 if clipped else 0). A part whose record holds
another number of tokens than the part trained (a log from another tokenization) is left out and
named in the second value returned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentgym_rl.episode.context import part_id
from agentgym_rl.episode.log import EpisodeRecord
from agentgym_rl.learner.token_log import TokenRecord

TOKEN_FIELDS = ("text", "learner", "behaviour", "entropy", "weight", "ratio", "clipped")
DIGITS = 3


def _value(x: float | None) -> float | None:
    return None if x is None else round(float(x), DIGITS)


def trained_tokens(
    rec: EpisodeRecord,
    tokens: Mapping[str, TokenRecord],
    decode: Callable[[Sequence[int]], str],
) -> tuple[dict[int, list[Any]], list[str]]:
    """See the module docstring: (values by position, problems)."""
    out: dict[int, list[Any]] = {}
    problems = []
    for k, (s, e) in enumerate(rec.part_ranges):
        record = tokens.get(part_id(rec.request_id, k))
        if record is None:
            continue
        positions = [i for i in range(s, e) if rec.loss_mask[i]]
        if len(positions) != len(record):
            problems.append(
                f"part {k + 1}: the token log holds {len(record)} tokens, the episode trained "
                f"{len(positions)}: not shown"
            )
            continue
        clipped = set(record.clipped)
        entropy = record.entropy
        for j, i in enumerate(positions):
            out[i] = [
                decode([rec.input_ids[i]]),
                _value(record.learner[j]),
                _value(record.behaviour[j]),
                None if entropy is None else _value(entropy[j]),
                _value(record.weight[j]),
                _value(record.ratio[j]),
                int(j in clipped),
            ]
    return out, problems


__all__ = ["TOKEN_FIELDS", "trained_tokens"]
