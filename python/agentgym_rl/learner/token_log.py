"""Per-token record of a few trained samples a step: what the run viewer's token view shows.

Contract. With `learn.token_log` set, every `every_steps`-th step logs `samples_per_step` of the
step's rows (`pick_rows`: spread over the batch, the same rows for the same batch size and step).
A `TokenRecord` holds, for each trained token of its sample in order (the sample's loss-mask
positions, which are its episode part's generated tokens):
- `learner`: the learner's log-prob of the token at training time (the weights before the update,
  at the engine's temperature), `behaviour`: the engine's as it sampled it;
- `entropy`: of the learner's distribution at that position (nats; computed on logged steps);
- `weight`: what the off-policy correction multiplied the token's gradient by (`loss.correction`:
  1, the importance weight, or its truncation at `tis_cap`; 0 where dropped);
- `ratio`: PPO's ratio, current over proximal policy (1 when the proximal log-probs are the
  training forward's own, the default);
- `clipped`: indices of tokens whose gradient the PPO clip, the truncation or the drop changed.
Arrays are stored as base64 of little-endian float16 (2 bytes a value: ~11 bytes a token in the
file with its four arrays, about a quarter of the same numbers as JSON decimals);
`TokenRecord.from_json` decodes them. `TokenLog(log_dir, dp_rank)` appends records to
`<log_dir>/tokens.jsonl` (`tokens-dp<d>.jsonl` for data-parallel rank d > 0); `read_tokens(run)`
reads every such file of a run as a dict from request id to its latest record (a malformed line
raises `TokenLogError` naming file and line; a line still being written is skipped).
Torch-free, so the viewer reads the records without the learner's dependencies.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

TOKENS_FILE = "tokens.jsonl"
ARRAYS = ("learner", "behaviour", "entropy", "weight", "ratio")
Floats = npt.NDArray[np.float32]


class TokenLogError(ValueError):
    """A line of a token log that is not a token record."""


def _encode(values: npt.ArrayLike) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f2").tobytes()).decode("ascii")


def _decode(text: str) -> Floats:
    return np.frombuffer(base64.b64decode(text), dtype="<f2").astype(np.float32)


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """One logged sample's trained tokens (see the module docstring)."""

    step: int
    request_id: str
    learner: Floats
    behaviour: Floats
    entropy: Floats | None
    weight: Floats
    ratio: Floats
    clipped: list[int]

    def __len__(self) -> int:
        return len(self.learner)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "request_id": self.request_id}
        for name in ARRAYS:
            values = getattr(self, name)
            out[name] = None if values is None else _encode(values)
        out["clipped"] = self.clipped
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenRecord:
        arrays = {n: None if data.get(n) is None else _decode(data[n]) for n in ARRAYS}
        lengths = {len(a) for a in arrays.values() if a is not None}
        if len(lengths) != 1 or arrays["learner"] is None:
            raise ValueError(f"arrays of different lengths or missing: {sorted(lengths)}")
        return cls(
            int(data["step"]),
            str(data["request_id"]),
            clipped=[int(i) for i in data.get("clipped", [])],
            **arrays,  # type: ignore[arg-type]
        )


def pick_rows(rows: int, count: int, step: int) -> list[int]:
    """`count` of a batch's `rows`, spread over it and shifted each step (so a group's first
    sample is not always the one shown)."""
    if rows <= 0 or count <= 0:
        return []
    if count >= rows:
        return list(range(rows))
    stride = rows / count
    return sorted({(int(k * stride) + step) % rows for k in range(count)})


class TokenLog:
    """Appends token records of one data-parallel rank to its file."""

    def __init__(self, log_dir: Path | str, dp_rank: int = 0) -> None:
        name = TOKENS_FILE if dp_rank == 0 else f"tokens-dp{dp_rank}.jsonl"
        self.path = Path(log_dir) / name
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, records: Sequence[TokenRecord]) -> int:
        """Writes `records`; returns the bytes written (the step's cost on disk)."""
        text = "".join(json.dumps(r.to_json(), separators=(",", ":")) + "\n" for r in records)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(text)
        return len(text.encode())


def token_files(run_or_dir: Path) -> list[Path]:
    """A run's token logs (under `learn/`) or those of a learner's log folder."""
    folder = run_or_dir / "learn" if (run_or_dir / "learn").is_dir() else run_or_dir
    return sorted(folder.glob("tokens*.jsonl"))


def read_tokens(run_or_dir: Path) -> dict[str, TokenRecord]:
    """Every token record of a run by request id (the latest step's when logged twice)."""
    out: dict[str, TokenRecord] = {}
    for path in token_files(run_or_dir):
        lines = path.read_text(encoding="utf-8").split("\n")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = TokenRecord.from_json(json.loads(line))
            except (ValueError, KeyError, TypeError) as e:
                if n == len(lines):  # the last line, still being written
                    continue
                raise TokenLogError(f"{path}:{n}: not a token record ({e})") from e
            seen = out.get(record.request_id)
            if seen is None or seen.step <= record.step:
                out[record.request_id] = record
    return out


__all__ = [
    "TOKENS_FILE",
    "TokenLog",
    "TokenLogError",
    "TokenRecord",
    "pick_rows",
    "read_tokens",
    "token_files",
]
