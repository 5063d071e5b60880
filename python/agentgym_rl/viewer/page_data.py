"""What each view of the run viewer shows, as JSON-ready dicts (`viewer/app.py` serves them).

Contract: `RunView(run_dir)` finds the run's episode logs (`rollout-*/episodes.jsonl`, or the
one log under the folder), indexes them (`EpisodeIndex`) and reads its other records anew on
each call (`report.records.RunRecords`), so the page follows a run being written:
- `overview()`: held-out success by version per env with chance and rule, training success by
  version per env (from the indexed episodes), turns, throughput and staleness over time, and
  `missing`: what the page cannot show yet and why (no learner records, no episode log, ...);
- `episodes(query)`: a page of the episodes table (`EpisodeFilter.from_query`);
- `episode(ref)`: one episode as `show` renders it (`transcript.blocks` and `header`), with a
  row per generated turn (versions, tokens, mean behaviour log-prob, advantage, reward, part,
  and `shared`: how many other turns of its group acted from its state, None where not logged),
  and, where the learner's token log holds the episode, each trained block's tokens with their
  log-probs, entropy, weight and clipping (`token_view`, fields `token_fields`); a judged
  episode's `judge_prompt` (what its judge read; the verdict is in the header);
- `task(item_id)`: the task's held-out episodes at each evaluated version (the versions of
  `eval.jsonl`); where none was logged whole (a run from before they were), the outcomes
  `eval_episodes.jsonl` holds (`outcomes`: success, reward, turns, status; no transcript).
The tokenizer is loaded once, from the log's `tokenizer` (or `model`); without one, an episode's
text is its token ids.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym_rl.episode.log import EPISODES_FILE, EVAL_EPISODES_FILE, EpisodeRecord
from agentgym_rl.learner.credit_log import TrainedSample, read_trained, trained_files
from agentgym_rl.learner.token_log import TokenRecord, read_tokens, token_files
from agentgym_rl.report.records import RunRecords, number, read_jsonl
from agentgym_rl.viewer.episode_index import EpisodeFilter, EpisodeIndex
from agentgym_rl.viewer.token_view import TOKEN_FIELDS, trained_tokens
from agentgym_rl.viewer.transcript import blocks, episode_credit, header, turn_versions

PAGE_SIZE = 50
OVERVIEW_INDEX_S = 0.3
"""Indexing an overview request may do first (the viewer's thread does the rest)."""


def episode_logs(run_dir: Path) -> list[Path]:
    """The run's episode logs: one per rollout server, or the one anywhere under the folder."""
    found = sorted(run_dir.glob(f"rollout-*/{EPISODES_FILE}"))
    return found or sorted(run_dir.rglob(EPISODES_FILE))[:1]


class RunView:
    """See the module docstring."""

    def __init__(self, run_dir: Path, model: str | None = None) -> None:
        self.run_dir = run_dir
        self.model = model
        self.logs = episode_logs(run_dir)
        self.index = EpisodeIndex(self.logs)
        self._decode: Any = None
        self._decode_lock = threading.Lock()
        self._trained: dict[str, list[TrainedSample]] = {}
        self._trained_key: tuple[tuple[str, int], ...] | None = None
        self._tokens: dict[str, TokenRecord] = {}
        self._tokens_key: tuple[tuple[str, int], ...] | None = None

    def refresh_logs(self) -> None:
        """Pick up episode logs that appeared since (a rollout server that started later)."""
        logs = episode_logs(self.run_dir)
        if logs != self.logs and len(logs) > len(self.logs):
            self.logs = logs
            self.index = EpisodeIndex(logs)

    def overview(self) -> dict[str, Any]:
        self.index.grow(budget_s=OVERVIEW_INDEX_S)
        records = RunRecords.load(self.run_dir)
        envs: list[str | None] = [*records.eval_envs()] or [None]
        held_out = []
        for env in envs:
            chance, rule = records.yardstick(env)
            name = env or next(iter(records.yardsticks), None) or self._only_env()
            points = records.eval_by_version(env)
            held_out.append({"env": name, "points": points, "chance": chance, "rule": rule})
        train = self.index.counts("env", EpisodeFilter(split="train"))
        training = [
            {"env": env, "points": [(v, s / n) for v, (n, s) in sorted(by.items())]}
            for env, by in sorted(train.items())
        ]
        return {
            "run": records.name,
            "held_out": held_out,
            "training": training,
            "series": _series(records),
            "episodes": {
                "indexed": self.index.indexed,
                "complete": self.index.complete,
                "skipped": self.index.skipped,
            },
            "missing": self._missing(records),
        }

    def _only_env(self) -> str | None:
        envs = [e for e in self.index.texts("env") if e]
        return envs[0] if len(envs) == 1 else None

    def _missing(self, records: RunRecords) -> list[str]:
        out = []
        if not self.logs:
            out.append(
                f"no {EPISODES_FILE} under this folder yet: episodes appear once a rollout server "
                "logs them (rollout.episode_log_every > 0)"
            )
        if not records.learn:
            out.append("no learner records (learn/metrics.jsonl) yet")
        if not records.eval:
            out.append("no held-out evaluation (rollout-*/eval.jsonl) yet")
        if records.eval and not records.yardsticks:
            out.append("no yardsticks (rollout-*/yardsticks.json): chance and rule not shown")
        if self.index.skipped:
            out.append(f"{self.index.skipped} lines of the episode logs are not episodes: skipped")
        return out

    def episodes(self, query: dict[str, str]) -> dict[str, Any]:
        flt = EpisodeFilter.from_query(query)
        page = max(0, int(query.get("page") or 0))
        size = min(500, max(1, int(query.get("size") or PAGE_SIZE)))
        got = self.index.page(flt, page, size)
        return {
            "rows": got.rows,
            "page": page,
            "size": size,
            "matched": got.matched,
            "indexed": got.indexed,
            "complete": got.complete,
            "envs": [e for e in self.index.texts("env") if e],
        }

    def decode(self, rec: EpisodeRecord) -> Any:
        with self._decode_lock:
            if self._decode is None:
                self._decode = _decoder(self.model or rec.tokenizer)
            return self._decode

    def episode(self, ref: str) -> dict[str, Any]:
        rec = self.index.record(ref)
        credit = self._credit(rec)
        decode = self.decode(rec)
        tokens, token_problems = trained_tokens(rec, self._token_records(rec), decode)
        return {
            "ref": ref,
            "header": header(rec, ref, credit),
            "summary": {
                "item_id": rec.item_id,
                "env": rec.env,
                "split": rec.split,
                "version": rec.dispatch_version,
                "success": rec.success,
                "reward": rec.reward,
            },
            "blocks": [
                {
                    "kind": b.kind,
                    "text": b.text,
                    "trained": b.trained,
                    "turn": b.turn,
                    "part": b.part,
                    "tokens": _block_tokens(tokens, b.start, b.end) if b.trained else None,
                }
                for b in blocks(rec, decode, credit)
            ],
            "token_fields": TOKEN_FIELDS,
            "token_problems": token_problems,
            "turns": turn_rows(rec, credit),
            "parts": len(rec.part_ranges),
            "trained_tokens": rec.trained_tokens,
            "decoded": not isinstance(decode, _IdsDecoder),
            "judge_prompt": None if rec.judge is None else rec.judge.get("prompt"),
        }

    def _credit(self, rec: EpisodeRecord) -> TrainedSample | None:
        if rec.split != "train" or not rec.request_id:
            return None
        files = trained_files(self.run_dir)
        key = tuple((str(f), f.stat().st_size) for f in files if f.exists())
        with self._decode_lock:
            if key != self._trained_key:  # read again only when the learner wrote more
                self._trained, self._trained_key = read_trained(self.run_dir), key
            return episode_credit(self._trained, rec)

    def _token_records(self, rec: EpisodeRecord) -> dict[str, TokenRecord]:
        if rec.split != "train" or not rec.request_id:
            return {}
        files = token_files(self.run_dir)
        key = tuple((str(f), f.stat().st_size) for f in files if f.exists())
        with self._decode_lock:
            if key != self._tokens_key:  # read again only when the learner wrote more
                self._tokens, self._tokens_key = read_tokens(self.run_dir), key
            return self._tokens

    def task(self, item_id: str) -> dict[str, Any]:
        rows = [
            r
            for r in self.index.rows(EpisodeFilter(split="held_out", task=item_id))
            if r["item_id"] == item_id
        ]
        records = RunRecords.load(self.run_dir)
        versions = {int(v) for r in records.eval if (v := number(r, "version")) is not None}
        # a run logged before held-out episodes were logged whole has their outcomes alone
        outcomes = [
            e
            for path in sorted(self.run_dir.glob(f"rollout-*/{EVAL_EPISODES_FILE}"))
            for e in read_jsonl(path)
            if e.get("item_id") == item_id and number(e, "version") is not None
        ]
        by_version = []
        for v in sorted(versions | {r["version"] for r in rows}):
            logged = [r for r in rows if r["version"] == v]
            only = [] if logged else [e for e in outcomes if int(e["version"]) == v]
            by_version.append({"version": v, "episodes": logged, "outcomes": only})
        return {"item_id": item_id, "versions": by_version, "complete": self.index.complete}


def turn_rows(rec: EpisodeRecord, credit: TrainedSample | None) -> list[dict[str, Any]]:
    """A row per generated turn: what `transcript.turn_line` says, as numbers."""
    by_version = turn_versions(rec)
    out = []
    for k, (s, e) in enumerate(rec.turn_spans):
        lps = [x for x in rec.logprobs[s:e] if x is not None]
        adv = credit.turn_advantages[k] if credit and k < len(credit.turn_advantages) else None
        shared = credit.turn_shared if credit and credit.turn_shared else []
        out.append(
            {
                "turn": k + 1,
                "versions": by_version[k],
                "tokens": e - s,
                "logprob": sum(lps) / len(lps) if lps else None,
                "advantage": adv,
                "shared": shared[k] - 1 if k < len(shared) and shared[k] else None,
                "reward": rec.turn_rewards[k] if rec.turn_rewards else None,
                "part": next((i for i, (a, b) in enumerate(rec.part_ranges) if a <= s < b), 0),
            }
        )
    return out


def _block_tokens(tokens: dict[int, list[Any]], start: int, end: int) -> list[list[Any]] | None:
    """A trained block's tokens in the token view, when the log holds each of them."""
    got = [tokens.get(i) for i in range(start, end)]
    return None if not got or any(t is None for t in got) else got  # type: ignore[return-value]


class _IdsDecoder:
    """Without a tokenizer: the token ids themselves."""

    def __call__(self, ids: Sequence[int]) -> str:
        return " ".join(map(str, ids)) + " "


def _decoder(model: str | None) -> Any:
    if model is None or not (Path(model) / "tokenizer.json").is_file():
        return _IdsDecoder()
    from agentgym_rl.trajectory import ChatTokenizer

    return ChatTokenizer.from_dir(model).decode


def _series(records: RunRecords) -> dict[str, list[tuple[float, float]]]:
    """Over learner steps: turns per episode, generated and trained tokens/s, staleness."""
    out: dict[str, list[tuple[float, float]]] = {
        "turns": [],
        "generated tokens/s": [],
        "trained tokens/s": [],
        "staleness": [],
    }
    for records_of in records.rollout.values():
        for r in records_of:
            step = float(records.step_at(r))
            if (turns := number(r, "turns_mean")) is not None:
                out["turns"].append((step, turns))
            if (rate := number(r, "generated_tokens_per_s")) is not None:
                out["generated tokens/s"].append((step, rate))
            hist = r.get("staleness")
            if isinstance(hist, dict) and hist:
                total = sum(float(n) for n in hist.values())
                mean = sum(float(k) * float(n) for k, n in hist.items()) / total if total else 0.0
                out["staleness"].append((step, mean))
    for r in records.learn:
        if (rate := number(r, "tokens_per_s")) is not None and (s := number(r, "step")) is not None:
            out["trained tokens/s"].append((s, rate))
    return out
