"""`agentgym-rl show`: the transcript marks exactly the trained tokens, reports mask problems,
and selects episodes with clear errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from agentgym_rl.cli import main
from agentgym_rl.episode.agent import Played
from agentgym_rl.episode.log import EpisodeLog, EpisodeRecord, read_episodes
from agentgym_rl.learner.credit_log import TrainedLog, TrainedSample
from agentgym_rl.trajectory import ChatTokenizer
from agentgym_rl.viewer.transcript import LAST_ANSWER_LINE, mask_problems, render_plain, render_rich

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


def test_show_joins_what_the_learner_trained_the_episode_with(
    chat: ChatTokenizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    log = EpisodeLog(run / "rollout-0" / "episodes.jsonl")
    log.write(episode(chat))
    log.close()
    assert main(["show", str(run), "--no-color"]) == 0
    assert "advantage" not in capsys.readouterr().out  # not trained yet: nothing claimed
    TrainedLog(run / "learn").append(
        [TrainedSample(7, "g2-e0", 2, "babyai_3", "babyai", 1.0, "done", [0.71, None], [6, 0])]
    )
    assert main(["show", str(run), "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "trained in learner step 7 (policy v6 -> v7)" in out
    assert "── turn 1/6 · v4 · " in out and "advantage +0.710 ──" in out
    assert "· not trained ──" in out  # turn 2's tokens trained with nothing
    with (run / "learn" / "trained.jsonl").open("a") as f:
        f.write('{"step": 8, "request_id": "g2-e1"}\n{"step": 9, "req')  # bad, then half a line
    assert main(["show", str(run), "--no-color"]) == 2
    assert "trained.jsonl, line 2: not a trained sample" in capsys.readouterr().err


def test_by_turn_reads_the_runs_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    (run / "rollout-0").mkdir(parents=True)
    (run / "learn").mkdir()
    by_turn = {
        "1": {
            "turns": 10,
            "invalid": 1,
            "kinds": {"turn": 6, "go": 3, "none": 1},
        },  # no repeats kept
        "2": {"turns": 4, "invalid": 0, "repeated": 3, "kinds": {"go": 4}},
    }
    rollout = [{"time": 1.0, "episodes": 1}, {"time": 2.0, "episodes": 10, "by_turn": by_turn}]
    learn = [
        {"step": 1, "adv_by_turn": {"1": -0.2, "2": 0.4}, "step_group_share_by_turn": {"1": 1.0}},
        {"step": 2, "adv_by_turn": {"1": 0.0}, "step_group_share_by_turn": {"1": 0.5, "2": 0.0}},
    ]
    evals = [
        {"version": 0, "success": 0.2, "by_category": {"t1-d3+": 0.2}},
        {"version": 20, "success": 0.9, "by_category": {"t1-d3+": 0.9}},
    ]
    for path, rows in (
        (run / "rollout-0" / "metrics.jsonl", rollout),
        (run / "learn" / "metrics.jsonl", learn),
        (run / "rollout-0" / "eval.jsonl", evals),
    ):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "rollout-0" / "yardsticks.json").write_text(
        json.dumps(
            {"babyai|cap=5": {"env": "babyai", "chance": {"t1-d3+": 0.5}, "rule": {"t1-d3+": 1.0}}}
        )
    )
    assert main(["show", str(run), "--by-turn"]) == 0
    out = capsys.readouterr().out
    assert "| 1 | 10 | 10.0% | 0.0% | turn 60%, go 30%, none 10% | -0.100 | 75.0% |" in out
    assert "| 2 | 4 | 0.0% | 75.0% | go 100% | +0.400 | 0.0% |" in out
    assert "| babyai | t1-d3+ | 0.20 (v0) | 0.90 (v20) | 0.50 | 1.00 |" in out
    assert main(["show", str(tmp_path / "empty"), "--by-turn"]) == 2
    (tmp_path / "bare").mkdir()
    assert main(["show", str(tmp_path / "bare"), "--by-turn"]) == 2
    assert "no records by turn" in capsys.readouterr().err


def test_a_step_wise_episode_is_one_record_of_its_parts_and_shows_each(
    chat: ChatTokenizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.episode.test_context import TEXTS, play

    from agentgym_rl.episode.log import read_episodes, record_of

    ep = play(chat, 2)
    samples = ep.samples()
    rec = record_of(samples, ep.plan, 7, str(CHATML))
    assert rec.parts is not None and len(rec.parts) == 5 == len(rec.turn_spans)
    assert rec.parts[-1][1] == len(rec.input_ids) == sum(len(s.input_ids) for s in samples)
    assert (rec.turns, rec.reward, rec.request_id) == (5, 1.0, "g7-e1")
    assert not mask_problems(rec)
    run = tmp_path / "run"
    log = EpisodeLog(run / "rollout-0" / "episodes.jsonl", tokenizer=str(CHATML))
    log.record(Played(samples), ep.plan, 7)
    log.close()
    (back,) = read_episodes(run / "rollout-0" / "episodes.jsonl")
    assert back.parts == rec.parts and back.turn_spans == rec.turn_spans
    # the learner trained parts 0, 1 and 4 (say, 2 and 3 were in another step not logged)
    TrainedLog(run / "learn").append(
        [
            TrainedSample(3, rid, 7, "noop_1", "noop", 1.0, "done", [adv], [4])
            for rid, adv in (("g7-e1", 0.5), ("g7-e1/s1", -0.25), ("g7-e1/s4", 1.5))
        ]
    )
    assert main(["show", str(run), "--no-color"]) == 0
    out = capsys.readouterr().out
    marked = [part.split("»")[0] for part in out.split("«")[1:]]
    assert marked == [f"{text}<|im_end|>" for text in TEXTS]
    assert [f"── part {k}/5: a sample of its own" in out for k in range(1, 7)] == [False] + [
        True
    ] * 4 + [False]
    assert "advantage +0.500 ──" in out and "advantage -0.250 ──" in out
    assert "advantage +1.500 ──" in out and out.count("· not trained ──") == 2
    assert out.count("── turn ") == 5


def test_a_judged_episode_shows_the_judge_beside_the_env_and_survives_the_log(
    chat: ChatTokenizer, tmp_path: Path
) -> None:
    verdict = {"score": 0.25, "mode": "group", "prompt": "Attempt 1: ...", "reply": "1: 0.25\n2: 1"}
    verdict |= {"success": False, "env_reward": 1.0}
    rec = dataclasses.replace(episode(chat, reward=0.625), judge=verdict)
    out = render_plain(rec, chat.decode, "0 of 1")
    assert "judge (group): score 0.25, failure · env reward 1, env says success" in out
    assert "judge's reply: 1: 0.25 / 2: 1" in out

    path = tmp_path / "episodes.jsonl"
    path.write_text(rec.to_json() + "\n" + episode(chat).to_json() + "\n")
    back, plain = read_episodes(path)
    assert back.judge == verdict and plain.judge is None
    assert json.loads(path.read_text().splitlines()[0])["v"] >= 4  # judge: since version 4
    assert "judge" not in render_plain(plain, chat.decode, "1 of 2")


def test_the_envs_last_answer_closes_the_transcript(chat: ChatTokenizer) -> None:
    rec = dataclasses.replace(episode(chat), last_observation="You completed the goal.")
    out = render_plain(rec, chat.decode, "0 of 1")
    assert out.endswith(f"{LAST_ANSWER_LINE}\nYou completed the goal.\n")
    assert LAST_ANSWER_LINE not in render_plain(episode(chat), chat.decode, "0 of 1")
    rich = Console(record=True, width=200)
    rich.print(render_rich(rec, chat.decode, "0 of 1"))
    assert rich.export_text().rstrip().endswith("You completed the goal.")
