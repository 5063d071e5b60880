"""`agentgym-rl show RUN_OR_FILE`: print one logged episode with its loss mask visible.

Only argparse runs at parse time. Exit codes: 0 shown, 2 bad input (no log, no such episode,
no tokenizer), each with one message naming the fix.
"""

from __future__ import annotations

import argparse
import os
import sys

NAME = "show"
HELP = "print a logged episode as a transcript with its loss mask visible"
CHILDREN = ""
DESCRIPTION = (
    "Decodes one episode of a run's episodes.jsonl with the run's tokenizer: trained "
    "(generated) tokens highlighted, masked tokens dim, with reward, turn cap, status and "
    "the policy version of each turn; where the learner trained it, the step and the advantage "
    "each turn's tokens trained with. --by-turn prints the run by turn index instead: turns "
    "played, invalid share, commonest actions and mean advantage, and held-out success per "
    "category beside chance and the rule."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        metavar="RUN_OR_FILE",
        help="a run folder (its episodes.jsonl is found below it) or an episodes.jsonl file",
    )
    pick = parser.add_mutually_exclusive_group()
    pick.add_argument(
        "--episode", type=int, metavar="K", help="the K-th logged episode (0-based; -1 = last)"
    )
    pick.add_argument("--item", metavar="ID", help="the last logged episode of task ID")
    pick.add_argument("--last", action="store_true", help="the last logged episode (default)")
    pick.add_argument(
        "--by-turn",
        action="store_true",
        help="the run by turn index and held-out category (RUN_OR_FILE: a run folder)",
    )
    parser.add_argument(
        "--model", metavar="DIR", help="tokenizer/model folder (default: the one in the log)"
    )
    parser.add_argument(
        "--no-color",
        action="store_true",
        help="plain text, trained tokens marked «...» (the default when not on a terminal)",
    )


def run(args: argparse.Namespace) -> int:
    from agentgym_rl.episode.log import EpisodeLogError
    from agentgym_rl.learner.credit_log import TrainedLogError

    try:
        return _show(args)
    except (EpisodeLogError, TrainedLogError) as e:
        print(f"show: {e}", file=sys.stderr)
        return 2


def _by_turn(source: str) -> int:
    from pathlib import Path

    from agentgym_rl.episode.log import EpisodeLogError
    from agentgym_rl.report.by_turn import render
    from agentgym_rl.report.records import RunRecords

    run_dir = Path(source)
    if not run_dir.is_dir():
        raise EpisodeLogError(f"--by-turn: {source} is not a run folder")
    text = render(RunRecords.load(run_dir))
    if not text:
        raise EpisodeLogError(
            f"{source}: no records by turn or held-out category yet (rollout-*/metrics.jsonl "
            "with by_turn, learn/metrics.jsonl with adv_by_turn, rollout-*/eval.jsonl)"
        )
    sys.stdout.write(text)
    return 0


def _show(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agentgym_rl.episode.log import EpisodeLogError, find_episode_log
    from agentgym_rl.learner.credit_log import read_trained
    from agentgym_rl.trajectory import ChatTokenizer
    from agentgym_rl.viewer.episode_index import EpisodeFilter, EpisodeIndex
    from agentgym_rl.viewer.transcript import episode_credit, render_plain, render_rich

    if args.by_turn:
        return _by_turn(args.source)
    path = find_episode_log(args.source)
    # the viewer's index: a line's scalars only, the chosen episode read whole
    index = EpisodeIndex([path])
    index.grow()
    refs = [row["ref"] for row in index.rows(EpisodeFilter())]
    if index.skipped:
        print(f"show: {path}: {index.skipped} lines are not episodes (skipped)", file=sys.stderr)
    if not refs:
        raise EpisodeLogError(f"{path}: no episodes logged yet")
    if args.item is not None:
        rows = index.rows(EpisodeFilter(task=args.item))
        matches = [r["ref"] for r in rows if r["item_id"] == args.item][-1:]
        if not matches:
            some = ", ".join(sorted(set(index.texts("item_id")))[:8])
            raise EpisodeLogError(f"{path}: no episode of item {args.item!r} (logged: {some}...)")
        position = refs.index(matches[0])
    else:
        position = -1 if args.episode is None else args.episode
        if not -len(refs) <= position < len(refs):
            raise EpisodeLogError(
                f"--episode {position}: the log has {len(refs)} episodes (0..{len(refs) - 1})"
            )
        position %= len(refs)
    rec = index.record(refs[position])
    model = args.model or rec.tokenizer
    if model is None:
        raise EpisodeLogError(f"{path}: the log names no tokenizer; pass --model DIR")
    if not (Path(model) / "tokenizer.json").is_file():
        raise EpisodeLogError(
            f"tokenizer {model}: no tokenizer.json there; pass --model DIR (the run's model)"
        )
    chat = ChatTokenizer.from_dir(model)
    where = f"{position} of {len(refs)}"
    # the learner's logs sit beside the rollout server's folder in a run
    credit = episode_credit(read_trained(path.parent.parent), rec) if rec.request_id else None
    plain = args.no_color or "NO_COLOR" in os.environ or not sys.stdout.isatty()
    if plain:
        sys.stdout.write(render_plain(rec, chat.decode, where, credit))
    else:
        from rich.console import Console

        Console(highlight=False).print(render_rich(rec, chat.decode, where, credit))
    return 0
