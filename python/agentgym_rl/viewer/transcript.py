"""One logged episode as a transcript with its loss mask visible (`agentgym-rl show`).

Contract: `segments(record, decode)` cuts the token sequence into runs of equal `loss_mask` (and
at the start of each of the episode's parts, when it trained as several samples: step-wise
context, a user agent's segments) and decodes each run (special tokens kept, so the chat template's markers show). A trained run is
labelled with the generated turn (`turn_spans`) it lies in; a trained run outside every span,
or a span not fully trained, is a mask/span mismatch and is reported in `mask_problems`, since
that is what this view is for. `render_plain` marks trained text as «...» (for pipes and
`--no-color`); `render_rich` highlights it and dims the masked context. Both start with a header
(task, reward, success, status, turns / turn cap, stage, versions) and put one line before each
generated turn: its number, policy version(s), token count and mean log-probability. Given the
learner's record of the episode (`credit`: `episode_credit`, the `credit_log.TrainedSample` of
each of its parts joined by request id), the header says which step trained it and each turn line
the advantage its tokens trained with. A judged episode's header adds the judge's score, its
verdict and reply beside the env's (`judge_lines`). A part after the first opens with a line of
its own. The env's answer to the last turn, which no context holds, closes the transcript under
a line of its own where the log kept it (`last_observation`).
`blocks` is that reading order as data (part lines, turn lines, text runs): both renderers and
the run viewer's page (`page_data.py`) lay it out, so `show` and `view` never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rich.console import Group
from rich.text import Text

from agentgym_rl.episode.context import part_id
from agentgym_rl.episode.log import EpisodeRecord
from agentgym_rl.learner.credit_log import TrainedSample

Decode = Callable[[Sequence[int]], str]
TRAINED_STYLE = "bold green"
MASKED_STYLE = "dim"
TURN_STYLE = "cyan"
LAST_ANSWER_LINE = "── the env's last answer (in no context: the episode ended on it) ──"


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of tokens with one mask value; `turn` is the generated turn it belongs to."""

    start: int
    end: int
    trained: bool
    text: str
    turn: int | None = None
    part: int | None = None
    """The episode's part this run opens (from the second part on), else None."""


def segments(rec: EpisodeRecord, decode: Decode) -> list[Segment]:
    out: list[Segment] = []
    mask = rec.loss_mask
    opens = {s: k for k, (s, _) in enumerate(rec.part_ranges) if k > 0}
    start = 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or bool(mask[i]) != bool(mask[start]) or i in opens:
            trained = bool(mask[start])
            turn = _turn_of(rec.turn_spans, start) if trained else None
            text = decode(rec.input_ids[start:i])
            out.append(Segment(start, i, trained, text, turn, opens.get(start)))
            start = i
    return out


def episode_credit(
    trained: Mapping[str, Sequence[TrainedSample]], rec: EpisodeRecord
) -> TrainedSample | None:
    """The learner's latest record of each of the episode's parts, as one (a part not trained
    has its turns `None`, and step groups of 0); None when no part was trained."""
    found = [trained.get(part_id(rec.request_id, k)) for k in range(len(rec.part_ranges))]
    if not any(found):
        return None
    latest = [f[-1] if f else None for f in found]
    first = next(t for t in latest if t is not None)
    advantages: list[float | None] = []
    tokens: list[int] = []
    shared: list[int] = []
    for t, (s, e) in zip(latest, rec.part_ranges, strict=True):
        turns = sum(1 for a, _ in rec.turn_spans if s <= a < e)
        advantages += t.turn_advantages if t is not None else [None] * turns
        tokens += t.turn_tokens if t is not None else [0] * turns
        shared += t.turn_shared if t is not None and t.turn_shared else [0] * turns
    return TrainedSample(
        max(t.step for t in latest if t is not None),
        rec.request_id,
        first.group_id,
        first.task_id,
        first.env,
        first.reward,
        first.status,
        advantages,
        tokens,
        turn_shared=shared if any(t is not None and t.turn_shared for t in latest) else None,
    )


def part_line(rec: EpisodeRecord, part: int) -> str:
    return (
        f"── part {part + 1}/{len(rec.part_ranges)}: a sample of its own, its prompt as this "
        f"turn read it ──"
    )


def _turn_of(spans: Sequence[tuple[int, int]], token: int) -> int | None:
    return next((k for k, (s, e) in enumerate(spans) if s <= token < e), None)


def mask_problems(rec: EpisodeRecord) -> list[str]:
    """Where the loss mask and the generated-turn spans disagree (empty when consistent)."""
    expected = [0] * len(rec.loss_mask)
    for s, e in rec.turn_spans:
        expected[s:e] = [1] * (e - s)
    wrong = [i for i, (m, x) in enumerate(zip(rec.loss_mask, expected, strict=True)) if m != x]
    if not wrong:
        return []
    trained_outside = sum(1 for i in wrong if rec.loss_mask[i])
    return [
        f"loss mask disagrees with the generated-turn spans on {len(wrong)} tokens "
        f"({trained_outside} trained outside a turn, {len(wrong) - trained_outside} generated "
        f"but masked), first at token {wrong[0]}"
    ]


def turn_versions(rec: EpisodeRecord) -> list[list[int]]:
    """The distinct policy versions of each generated turn's tokens, in order."""
    return [sorted(set(rec.versions[s:e])) for s, e in rec.turn_spans]


def turn_line(rec: EpisodeRecord, turn: int, credit: TrainedSample | None = None) -> str:
    s, e = rec.turn_spans[turn]
    versions = "→".join(f"v{v}" for v in turn_versions(rec)[turn])
    lps = [x for x in rec.logprobs[s:e] if x is not None]
    mean = f"{sum(lps) / len(lps):.3f}" if lps else "n/a"
    adv = _turn_advantage(credit, turn)
    return (
        f"── turn {turn + 1}/{rec.turn_cap} · {versions} · {e - s} tokens · mean logprob {mean}"
        f"{adv} ──"
    )


def _turn_advantage(credit: TrainedSample | None, turn: int) -> str:
    if credit is None or turn >= len(credit.turn_advantages):
        return ""
    a = credit.turn_advantages[turn]
    return " · not trained" if a is None else f" · advantage {a:+.3f}"


def credit_line(credit: TrainedSample | None) -> list[str]:
    if credit is None:
        return []
    return [f"trained in learner step {credit.step} (policy v{credit.step - 1} -> v{credit.step})"]


def header(rec: EpisodeRecord, position: str, credit: TrainedSample | None = None) -> list[str]:
    category = f", {rec.category}" if rec.category else ""
    by_turn = " ".join("/".join(map(str, v)) for v in turn_versions(rec)) or "-"
    return [
        f"episode {position} · {rec.item_id} ({rec.env}{category}) · group {rec.group_id} · "
        f"{rec.request_id}",
        f"reward {rec.reward:g} · success {'yes' if rec.success else 'no'} · status "
        f"{rec.status} · turns {rec.turns}/{rec.turn_cap} · stage {rec.stage} · dispatch "
        f"version {rec.dispatch_version}" + (" · DRIFT" if rec.drift else ""),
        f"tokens {len(rec.input_ids)} (trained {rec.trained_tokens}) · policy versions by "
        f"turn: {by_turn}",
        *credit_line(credit),
        *([f"env failure: {rec.failure}"] if rec.failure else []),
        *judge_lines(rec),
        *mask_problems(rec),
    ]


def judge_lines(rec: EpisodeRecord) -> list[str]:
    """A judged episode's verdict beside the env's (its prompt is the viewer's to unfold)."""
    j = rec.judge
    if j is None:
        return []
    said = "success" if j.get("success") else "failure"
    reply = " / ".join(line.strip() for line in str(j.get("reply", "")).splitlines() if line)
    return [
        f"judge ({j.get('mode')}): score {j.get('score'):g}, {said} · env reward "
        f"{j.get('env_reward', 0.0):g}, env says {'success' if rec.success else 'failure'}",
        f"judge's reply: {reply[:300]}",
    ]


@dataclass(frozen=True, slots=True)
class Block:
    """One piece of a transcript in reading order: a `part` or `turn` line, or `text` (a
    segment's decoded tokens, `trained` or context). `render_plain`, `render_rich` and the run
    viewer's page (`viewer/page_data.py`) all lay out these, so they never disagree."""

    kind: str
    """`part` (a line opening an episode's later sample), `turn` (a turn's line) or `text`."""
    text: str
    trained: bool = False
    turn: int | None = None
    part: int | None = None
    start: int = 0
    """A `text` block's first token position in the episode (`end`: one past its last)."""
    end: int = 0


def blocks(rec: EpisodeRecord, decode: Decode, credit: TrainedSample | None = None) -> list[Block]:
    out: list[Block] = []
    part = 0
    for seg in segments(rec, decode):
        if seg.part is not None:
            part = seg.part
            out.append(Block("part", part_line(rec, seg.part), part=part))
        if seg.trained and seg.turn is not None:
            out.append(Block("turn", turn_line(rec, seg.turn, credit), True, seg.turn, part))
        out.append(Block("text", seg.text, seg.trained, seg.turn, part, seg.start, seg.end))
    return out


def _turn_break(previous: str) -> str:
    return "" if not previous or previous.endswith("\n") else "\n"


def render_plain(
    rec: EpisodeRecord, decode: Decode, position: str = "", credit: TrainedSample | None = None
) -> str:
    parts = ["\n".join(header(rec, position, credit)), "\n\n"]
    for b in blocks(rec, decode, credit):
        if b.kind == "text":
            parts.append(f"«{b.text}»" if b.trained else b.text)
        else:
            parts += [_turn_break(parts[-1]), b.text, "\n"]
    if rec.last_observation is not None:
        parts += [_turn_break(parts[-1]), LAST_ANSWER_LINE, "\n", rec.last_observation]
    return "".join(parts).rstrip("\n") + "\n"


def render_rich(
    rec: EpisodeRecord, decode: Decode, position: str = "", credit: TrainedSample | None = None
) -> Group:
    lines = header(rec, position, credit)
    plain = 3 + len(credit_line(credit))
    head = [Text(lines[0], style="bold"), *(Text(x) for x in lines[1:plain])]
    head += [Text(x, style="bold red") for x in lines[plain:]]
    body = Text()
    last = ""
    for b in blocks(rec, decode, credit):
        if b.kind == "text":
            body.append(b.text, style=TRAINED_STYLE if b.trained else MASKED_STYLE)
            last = b.text
        else:
            style = "bold" if b.kind == "part" else TURN_STYLE
            body.append(_turn_break(last) + b.text + "\n", style=style)
            last = "\n"
    if rec.last_observation is not None:
        body.append(_turn_break(last) + LAST_ANSWER_LINE + "\n", style=TURN_STYLE)
        body.append(rec.last_observation, style=MASKED_STYLE)
    return Group(*head, Text(""), body)
