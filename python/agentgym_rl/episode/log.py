"""Episode logs: finished episodes appended to `<log_dir>/episodes.jsonl`, and read back.

Contract: `EpisodeLog.record(samples, plan, group_id)` appends one JSON object per kept episode
(every `every`-th episode recorded, counting from the first; `every=0` builds no log). A line
holds the task (`item_id`, `env`, `category`), the episode (`group_id`, `request_id`, `reward`,
`success` (the env's rule, `outcome.is_success`), `status`, `turns`, `turn_cap`, `stage`,
`dispatch_version`, `drift`),
the tokenizer directory to decode it with, and the token arrays exactly as trained on:
`input_ids`, `loss_mask`, `logprobs` (rounded to 4 decimals), `versions` and `turn_spans`
(`[[start, end], ...]` of generated turns). An episode trained as several samples (step-wise
context: one per turn; a user agent's segments) is logged as one line: its samples' arrays one
after the other, `parts` their `[[start, end], ...]` token ranges (format version 2; absent, as in
version 1, for an episode of one sample), its reward, status and turns from the last. Version 3
adds `split` (`train`, or `held_out` for a held-out evaluation's episode, logged whatever
`every` says), `invalid_turns`, `forks` (a user agent's segments forked off, else 0) and
`turn_rewards` (per generated turn, where the env gives them; else absent), and writes the
episode's scalars before its token arrays, so that `summary_of(line)` reads a line's scalars
without parsing its tokens (what the run viewer's index does over a million lines); lines of
versions 1 and 2 read with `split` "train" and the new counts unknown (None). Version 4 adds
`judge` where a judge scored the episode (`judging/`): its `score`, `mode`, `prompt`, `reply`,
`success` (by the reward's `success_at`) and `env_reward`; `reward` is then the judged reward
and `success` stays the env's own verdict, so a log shows the judge beside the truth. Version 5
adds `last_observation`: the env's answer to the episode's last turn (its head and tail, at most
`LAST_OBSERVATION_CHARS`), which no turn's context holds since the episode ended on it (how a
TextCraft episode ended, "Crafted 1 ..."); absent where none came (and in older lines).
Each line is written with one `write` and flushed,
so a reader (`agentgym-rl show`, `agentgym-rl view`) sees whole episodes while the run goes on.
`read_episodes(path)` yields `EpisodeRecord`s; a malformed line raises `EpisodeLogError` naming
the file, line and key. `find_episode_log(run_or_file)` resolves a run folder to its log.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from agentgym_rl.episode.clipping import clip_middle
from agentgym_rl.episode.outcome import is_success

if TYPE_CHECKING:
    from agentgym_rl import _core
    from agentgym_rl.episode.agent import Played
    from agentgym_rl.episode.types import EpisodePlan

EPISODES_FILE = "episodes.jsonl"
EVAL_EPISODES_FILE = "eval_episodes.jsonl"
"""A held-out evaluation's outcome per episode (`rollout/held_out.py`), no tokens."""
FORMAT_VERSION = 5
"""Version 2 added `parts`, version 3 `split`, `invalid_turns`, `forks`, `turn_rewards` and the
scalars-first order, version 4 `judge`, version 5 `last_observation`; version 1 lines read as
episodes of one part."""
LAST_OBSERVATION_CHARS = 2000
SPLITS = ("train", "held_out")
ARRAY_KEYS: tuple[str, ...] = ("input_ids", "loss_mask", "logprobs", "versions", "turn_spans")
ARRAY_KEYS += ("parts", "turn_rewards")
"""Written last, in this order: a line's scalars end where `"input_ids"` starts."""
_ARRAYS_START = ',"input_ids":'

LOGPROB_DECIMALS = 4


class EpisodeLogError(ValueError):
    """An episode log is missing, ambiguous or has a malformed line."""


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """One logged episode (see the module docstring for the fields)."""

    item_id: str
    env: str
    category: str | None
    group_id: int
    request_id: str
    reward: float
    success: bool
    status: str
    turns: int
    turn_cap: int
    stage: int
    dispatch_version: int
    drift: bool
    tokenizer: str | None
    input_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float | None]
    versions: list[int]
    turn_spans: list[tuple[int, int]]
    time: float = 0.0
    failure: str | None = None
    """Why the episode ended as an env failure (`episode.turn.env_failure`); None otherwise."""
    parts: list[tuple[int, int]] | None = None
    """Token ranges of the episode's samples when it trained as several, else None."""
    split: str = "train"
    """`train`, or `held_out`: a held-out evaluation's episode (never trained)."""
    invalid_turns: int | None = None
    """Turns that did nothing (`turn.Acted.invalid`); None in logs before version 3."""
    forks: int | None = None
    """A user agent's episode: segments forked off (`gateway/episodes.py`); else 0."""
    turn_rewards: list[float] | None = None
    """The reward of each generated turn, where the env gives them; else None."""
    judge: dict[str, Any] | None = None
    """A judge's verdict on the episode (see the module docstring); None when none judged it."""
    last_observation: str | None = None
    """The env's answer to the last turn (see the module docstring); None where none came."""

    @property
    def trained_tokens(self) -> int:
        return sum(self.loss_mask)

    @property
    def part_ranges(self) -> list[tuple[int, int]]:
        """The token ranges of the episode's samples (one covering all when it had one)."""
        return self.parts or [(0, len(self.input_ids))]

    def to_json(self) -> str:
        # the fields as they are, not `asdict`'s deep copy: copying the token lists took over a
        # quarter of the rollout loop's own CPU time when every episode is logged (the default)
        d: dict[str, Any] = {"v": FORMAT_VERSION}
        d.update((f.name, getattr(self, f.name)) for f in fields(self) if f.name not in ARRAY_KEYS)
        d.update((key, getattr(self, key)) for key in ARRAY_KEYS)
        d["turn_spans"] = [list(s) for s in self.turn_spans]
        for key in ("parts", "turn_rewards", "judge", "last_observation"):
            if d[key] is None:
                del d[key]
        if self.parts is not None:
            d["parts"] = [list(s) for s in self.parts]
        return json.dumps(d, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str) -> EpisodeRecord:
        missing = [k for k in _REQUIRED if k not in d]
        if missing:
            raise EpisodeLogError(
                f"{where}: missing key {missing[0]!r}; the line is not an episode record "
                f"(written by agentgym-rl's EpisodeLog?)"
            )
        n = len(d["input_ids"])
        for key in ("loss_mask", "logprobs", "versions"):
            if len(d[key]) != n:
                raise EpisodeLogError(
                    f"{where}: {key} has {len(d[key])} entries but input_ids has {n}; "
                    f"the line was truncated or edited"
                )
        fields = {k: d[k] for k in _FIELDS if k in d}
        fields["turn_spans"] = [(int(s), int(e)) for s, e in d["turn_spans"]]
        if d.get("parts") is not None:
            fields["parts"] = [(int(s), int(e)) for s, e in d["parts"]]
        fields.setdefault("category", None)
        fields.setdefault("tokenizer", None)
        if fields.get("split", "train") not in SPLITS:
            raise EpisodeLogError(f"{where}: split {fields['split']!r} is not one of {SPLITS}")
        return cls(**fields)


_FIELDS = tuple(EpisodeRecord.__dataclass_fields__)
_REQUIRED: tuple[str, ...] = ("item_id", "env", "reward", "status", "input_ids", "loss_mask")
_REQUIRED += ("logprobs",)
_REQUIRED += ("versions", "turn_spans", "turns", "turn_cap", "group_id", "request_id")
_REQUIRED += ("success", "stage", "dispatch_version", "drift")


def summary_of(line: str | bytes) -> dict[str, Any]:
    """A line's scalars (every key but the token arrays), parsed without its tokens where the
    line puts them last (every version does: `input_ids` follows the scalars); raises
    ValueError on a line that is not a JSON object."""
    text = line.decode() if isinstance(line, bytes) else line
    cut = text.find(_ARRAYS_START)
    d = json.loads(text[:cut] + "}") if cut > 0 else json.loads(text)
    if not isinstance(d, dict):
        raise ValueError("not a JSON object")
    return d


def record_of(
    samples: _core.Sample | Sequence[_core.Sample],
    plan: EpisodePlan,
    group_id: int,
    tokenizer: str | None,
    failure: str | None = None,
    *,
    split: str = "train",
    invalid_turns: int | None = None,
    forks: int = 0,
    judge: dict[str, Any] | None = None,
    last_observation: str | None = None,
) -> EpisodeRecord:
    """The log record of one finished episode (its one sample, or its samples in order)."""
    parts = [samples] if not isinstance(samples, Sequence) else list(samples)
    last = parts[-1]
    cat = {
        key: np.concatenate([np.asarray(getattr(s, key)) for s in parts])
        for key in ("input_ids", "loss_mask", "logprobs", "versions")
    }
    offsets = np.cumsum([0] + [len(s.input_ids) for s in parts])
    spans = np.concatenate(
        [
            np.asarray(s.turn_spans, dtype=np.int64).reshape(-1, 2) + off
            for s, off in zip(parts, offsets[:-1], strict=True)
        ]
    )
    logprobs = np.round(cat["logprobs"].astype(np.float64), LOGPROB_DECIMALS)
    rewards = np.concatenate([np.asarray(s.turn_rewards, dtype=np.float64) for s in parts])
    # per-turn rewards only where every part gave them, one a turn
    per_turn = len(rewards) == len(spans) and len(rewards) > 0
    return EpisodeRecord(
        item_id=plan.task.item_id,
        env=plan.task.env,
        category=plan.task.category,
        group_id=int(group_id),
        request_id=plan.request_id,
        reward=float(last.reward),
        # the env's verdict, also on a judged episode (whose reward is the judge's)
        success=is_success(plan.task.env, float((judge or {}).get("env_reward", last.reward))),
        status=last.status,
        turns=int(last.turns),
        turn_cap=int(last.turn_cap),
        stage=int(last.stage),
        dispatch_version=int(last.dispatch_version),
        drift=any(bool(s.drift) for s in parts),
        tokenizer=tokenizer,
        input_ids=cat["input_ids"].tolist(),
        loss_mask=cat["loss_mask"].tolist(),
        # NaN (no logprob from the engine) is not JSON; it is logged as null
        logprobs=[None if np.isnan(x) else float(x) for x in logprobs],
        versions=cat["versions"].tolist(),
        turn_spans=[(int(s), int(e)) for s, e in spans],
        time=round(time.time(), 3),
        failure=failure,
        parts=[(int(a), int(b)) for a, b in itertools.pairwise(offsets)]
        if len(parts) > 1
        else None,
        split=split,
        invalid_turns=invalid_turns,
        forks=forks,
        turn_rewards=[round(float(r), 6) for r in rewards] if per_turn else None,
        judge=judge,
        last_observation=(
            None
            if last_observation is None
            else clip_middle(last_observation, LAST_OBSERVATION_CHARS)
        ),
    )


def _last_observation(played: Played) -> str | None:
    state = played.state
    return state.exchanges[-1][1] if state is not None and state.exchanges else None


class EpisodeLog:
    """Appends every `every`-th episode to `path` (created with its folder on first write)."""

    def __init__(self, path: str | Path, *, every: int = 1, tokenizer: str | None = None) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1 (got {every}); use no EpisodeLog to turn it off")
        self.path = Path(path)
        self.every = every
        self.tokenizer = tokenizer
        self.seen = 0
        self.written = 0
        self._file: IO[str] | None = None

    @classmethod
    def in_dir(
        cls, log_dir: str | Path, every: int, tokenizer: str | None = None
    ) -> EpisodeLog | None:
        """`<log_dir>/episodes.jsonl`, or None when `every` is 0 (episode logs off)."""
        if every == 0:
            return None
        return cls(Path(log_dir) / EPISODES_FILE, every=every, tokenizer=tokenizer)

    def record(self, played: Played, plan: EpisodePlan, group_id: int) -> bool:
        """Log a training episode if it is one of the kept ones; True when it was written."""
        self.seen += 1
        if (self.seen - 1) % self.every:
            return False
        self.write(self.record_of(played, plan, group_id))
        return True

    def record_held_out(self, played: Played, plan: EpisodePlan, group_id: int = -1) -> None:
        """Log an evaluation's episode, never trained (each one: the viewer compares them by
        version)."""
        self.write(self.record_of(played, plan, group_id, split="held_out"))

    def record_of(
        self, played: Played, plan: EpisodePlan, group_id: int, split: str = "train"
    ) -> EpisodeRecord:
        return record_of(
            played.samples,
            plan,
            group_id,
            self.tokenizer,
            played.failure,
            split=split,
            invalid_turns=played.invalid,
            forks=played.forks,
            judge=played.judged,
            last_observation=_last_observation(played),
        )

    def write(self, rec: EpisodeRecord) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(rec.to_json() + "\n")
        self._file.flush()
        self.written += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_episodes(path: str | Path) -> Iterator[EpisodeRecord]:
    """The records of an episode log, in file order (a partly written last line is skipped)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise EpisodeLogError(f"{p}: cannot read the episode log ({e.strerror})") from None
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            if no == len(lines):
                return  # the writer is mid-line
            raise EpisodeLogError(f"{p}:{no}: not JSON ({e.msg})") from None
        if not isinstance(d, dict):
            raise EpisodeLogError(f"{p}:{no}: expected a JSON object per line")
        yield EpisodeRecord.from_dict(d, f"{p}:{no}")


def find_episode_log(run_or_file: str | Path) -> Path:
    """The file itself, or the one `episodes.jsonl` under a run folder (searched recursively)."""
    p = Path(run_or_file)
    if p.is_file():
        return p
    if not p.is_dir():
        raise EpisodeLogError(f"{p}: no such file or run folder")
    found = sorted(p.rglob(EPISODES_FILE))
    if not found:
        raise EpisodeLogError(
            f"{p}: no {EPISODES_FILE} under this folder; episode logs are written by "
            f"serve-rollouts when episode_log_every > 0, and by eval for a local checkpoint"
        )
    if len(found) > 1:
        names = ", ".join(str(f) for f in found)
        raise EpisodeLogError(f"{p}: {len(found)} episode logs ({names}); pass one of them")
    return found[0]
