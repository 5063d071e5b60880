"""`agentgym-rl show`: the transcript marks exactly the trained tokens, reports mask problems,
and selects episodes with clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agentgym_rl.cli import main
from agentgym_rl.episode.log import EpisodeLog, EpisodeRecord
from agentgym_rl.evaluation.transcript import mask_problems, render_plain, render_rich
from agentgym_rl.trajectory import ChatTokenizer

CHATML = Path(__file__).resolve().parents[1] / "fixtures" / "templates" / "chatml"


def episode(chat: ChatTokenizer, item: str = "babyai_3", reward: float = 1.0) -> EpisodeRecord:
    """System + user prompt, two generated turns (versions 4 then 5) with an observation."""
    eos = int(chat.eos_token_id or 0)
    ids = chat.apply_chat_template(
        [{"role": "system", "content": "sys"}, {"role": "user", "content": "goal: red ball"}],
        add_generation_prompt=True,
    ).tolist()
    spans = []
    for turn, text in enumerate(["Action: go left", "Action: pick up"]):
        gen = [*chat.encode(text).tolist(), eos]
        spans.append((len(ids), len(ids) + len(gen)))
        ids += gen
        if turn == 0:
            ids += chat.encode("\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n").tolist()
    mask = np.zeros(len(ids), int)
    versions = np.full(len(ids), 4, int)
    for k, (s, e) in enumerate(spans):
        mask[s:e] = 1
        versions[s:e] = 4 + k
    return EpisodeRecord(
        item_id=item,
        env="babyai",
        category="GoTo",
        group_id=2,
        request_id="g2-e0",
        reward=reward,
        success=reward > 0,
        status="done",
        turns=2,
        turn_cap=6,
        stage=0,
        dispatch_version=4,
        drift=False,
        tokenizer=str(CHATML),
        input_ids=ids,
        loss_mask=mask.tolist(),
        logprobs=[-0.5 if m else 0.0 for m in mask],
        versions=versions.tolist(),
        turn_spans=spans,
    )


@pytest.fixture(scope="module")
def chat() -> ChatTokenizer:
    return ChatTokenizer.from_dir(CHATML)


def test_plain_marks_exactly_the_trained_text(chat: ChatTokenizer) -> None:
    rec = episode(chat)
    out = render_plain(rec, chat.decode, "0 of 1")
    assert "babyai_3 (babyai, GoTo) · group 2" in out
    assert "reward 1 · success yes · status done · turns 2/6" in out
    assert "policy versions by turn: 4 5" in out
    marked = [part.split("»")[0] for part in out.split("«")[1:]]
    assert marked == ["Action: go left<|im_end|>", "Action: pick up<|im_end|>"]
    assert "── turn 1/6 · v4 · " in out and "── turn 2/6 · v5 · " in out
    assert "mean logprob -0.500" in out
    assert "goal: red ball" in out.split("«")[0]  # the prompt is shown, unmarked
    assert not mask_problems(rec)


def test_mask_outside_turns_is_reported(chat: ChatTokenizer) -> None:
    rec = episode(chat)
    mask = list(rec.loss_mask)
    mask[1] = 1  # a prompt token trained: the bug this view exists to show
    bad = EpisodeRecord(**{**{f: getattr(rec, f) for f in rec.__slots__}, "loss_mask": mask})
    problems = mask_problems(bad)
    assert problems and "on 1 tokens (1 trained outside a turn" in problems[0]
    assert problems[0] in render_plain(bad, chat.decode)
    from rich.console import Console

    console = Console(record=True, width=100, color_system="truecolor", force_terminal=True)
    console.print(render_rich(bad, chat.decode))
    assert "\x1b[" in console.export_text(styles=True)  # styled, not marked
    assert "«" not in console.export_text()


def test_cli_selects_episodes_and_explains_bad_input(
    chat: ChatTokenizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = EpisodeLog(tmp_path / "run" / "rollout" / "episodes.jsonl")
    for item, reward in (("babyai_1", 0.0), ("babyai_2", 1.0), ("babyai_1", 0.5)):
        log.write(episode(chat, item, reward))
    log.close()
    run = str(tmp_path / "run")
    assert main(["show", run, "--no-color"]) == 0
    assert "episode 2 of 3 · babyai_1" in capsys.readouterr().out
    assert main(["show", run, "--episode", "1", "--no-color"]) == 0
    assert "episode 1 of 3 · babyai_2" in capsys.readouterr().out
    assert main(["show", run, "--item", "babyai_1", "--no-color"]) == 0
    assert "reward 0.5" in capsys.readouterr().out

    assert main(["show", run, "--episode", "3"]) == 2
    assert "the log has 3 episodes (0..2)" in capsys.readouterr().err
    assert main(["show", run, "--item", "babyai_9"]) == 2
    assert "no episode of item 'babyai_9' (logged: babyai_1, babyai_2" in capsys.readouterr().err
    assert main(["show", run, "--model", str(tmp_path)]) == 2
    assert "no tokenizer.json there; pass --model DIR" in capsys.readouterr().err
    assert main(["show", str(tmp_path / "nothing")]) == 2
    assert "no such file or run folder" in capsys.readouterr().err
