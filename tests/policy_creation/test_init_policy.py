"""init-model: random-action transcripts, the assistant-only warm-up mask, the whole command."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from agentgym_rl.cli import main
from agentgym_rl.config import ActionFormat
from agentgym_rl.config.init_model import InitModelConfig
from agentgym_rl.episode.actions import parse_action
from agentgym_rl.episode.dataset import load_split
from agentgym_rl.policy_creation.init_policy import INFO_FILE, init_policy, tasks_to_play
from agentgym_rl.policy_creation.transcripts import (
    Transcript,
    corpus_text,
    play_transcripts,
    thought_from,
)
from agentgym_rl.policy_creation.warmup import encode, format_warmup
from agentgym_rl.trajectory import ChatTokenizer

ROOT = Path(__file__).resolve().parents[2]
GOTO_TRAIN = ROOT / "envs/agentgym_envs/babyai/data/goto_train.json"
_LISTED = re.compile(r"Available actions: (\[.*\])")
_TOKENIZER_ONLY = dict(
    hidden=64, layers=1, heads=1, kv_heads=1, intermediate=128, warmup_steps=1, warmup_batch=2
)
"""The smallest model and warm-up: for tests of the created tokenizer only."""


def test_transcripts_play_listed_actions_in_the_agent_format() -> None:
    tasks = load_split(GOTO_TRAIN, "babyai")[:30]
    played = play_transcripts("babyai", tasks, turn_cap=3, seed=1, system_prompt="Be brief.")
    assert [t.item_id for t in played] == [t.item_id for t in tasks]
    for t in played:
        roles = [m["role"] for m in t.messages]
        assert roles[:2] == ["system", "user"] and t.messages[0]["content"] == "Be brief."
        assert roles[-1] == "assistant" and roles.count("assistant") <= 3
        for before, turn in zip(t.messages, t.messages[1:], strict=False):
            if turn["role"] != "assistant":
                continue
            parsed = parse_action(turn["content"], ActionFormat.REACT)
            listed = json.loads(_LISTED.findall(before["content"])[-1])
            assert parsed.action in listed  # a valid action of the observation it answers
    # the same seed plays the same actions; success is what random play gets, not zero or all
    again = play_transcripts("babyai", tasks, turn_cap=3, seed=1, system_prompt="Be brief.")
    assert [t.messages for t in again] == [t.messages for t in played]
    assert 0 < sum(t.success for t in played) < len(played)
    assert any(text.startswith("assistant\nAction: ") for text in corpus_text(played))


def test_thought_line_restates_the_goal_and_keeps_the_actions() -> None:
    tasks = load_split(GOTO_TRAIN, "babyai")[:20]
    compact = {"observation": "compact"}
    plain = play_transcripts("babyai", tasks, turn_cap=3, seed=2, env_options=compact)
    thought = play_transcripts(
        "babyai", tasks, turn_cap=3, seed=2, env_options=compact, thought_line="Goal:"
    )
    for a, b in zip(plain, thought, strict=True):
        assert b.success == a.success
        goal = next(
            line.removeprefix("Goal:").strip()
            for line in b.messages[1]["content"].splitlines()
            if line.startswith("Goal:")
        )
        for m, n in zip(a.messages, b.messages, strict=True):
            if m["role"] != "assistant":
                assert n == m
                continue
            # same random action, now after the goal the observation gave
            assert n["content"] == f"Thought: {goal}\n{m['content']}"
            assert parse_action(n["content"], ActionFormat.REACT) == parse_action(
                m["content"], ActionFormat.REACT
            )
    assert thought_from("Goal: go to the red ball\nSeen: nothing", "Goal:") == "go to the red ball"
    assert thought_from("Seen: nothing", "Goal:") is None
    assert thought_from("Goal: x", None) is None


@pytest.fixture(scope="module")
def small_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("init") / "policy"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(
            [
                "init-model",
                f"--out={out}",
                "--transcripts=24",
                "--turn-cap=2",
                "--vocab-size=400",
                "--layers=1",
                "--copy-steps=30",
                "--warmup-steps=40",
                "--warmup-batch=4",
                "--warmup-lr=3e-3",
                "--split=envs/agentgym_envs/babyai/data/goto_train.json",
            ]
        )
    assert code == 0, printed.getvalue()
    (out.parent / "init-model.log").write_text(printed.getvalue())
    return out


def test_warmup_targets_only_assistant_turns(small_policy: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(small_policy))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Your goal: go to the red ball"},
        {"role": "assistant", "content": "Action: go to red ball 1"},
        {"role": "user", "content": "You see a wall."},
        {"role": "assistant", "content": "Action: turn left"},
    ]
    enc = encode(tok, messages)
    full = tok.apply_chat_template(messages, tokenize=False)
    assert enc.ids == tok.encode(full, add_special_tokens=False)  # per-message == whole render
    targets = tok.decode([i for i, w in zip(enc.ids, enc.weights, strict=True) if w])
    assert targets == "Action: go to red ball 1<|im_end|>Action: turn left<|im_end|>"
    assert {w for w in enc.weights if w} == {1.0}
    with_obs = encode(tok, messages, observation_weight=0.25)
    assert with_obs.ids == enc.ids
    targets = tok.decode([i for i, w in zip(with_obs.ids, with_obs.weights, strict=True) if w])
    assert targets == (  # the observations join the targets; system prompt and headers do not
        "Your goal: go to the red ball<|im_end|>Action: go to red ball 1<|im_end|>"
        "You see a wall.<|im_end|>Action: turn left<|im_end|>"
    )
    observed = tok.decode(
        [i for i, w in zip(with_obs.ids, with_obs.weights, strict=True) if w == 0.25]
    )
    assert observed == "Your goal: go to the red ball<|im_end|>You see a wall.<|im_end|>"


def test_init_model_writes_a_loadable_warmed_up_policy(small_policy: Path) -> None:
    from transformers import AutoModelForCausalLM

    printed = (small_policy.parent / "init-model.log").read_text()
    # each stage reports its progress: minutes of silence otherwise on 2 cores
    assert "read-and-copy step 30/30 loss" in printed and "warm-up step 40/40 loss" in printed

    info = json.loads((small_policy / INFO_FILE).read_text())
    assert info["options"]["transcripts"] == 24 and 0.0 <= info["random_action_success"] <= 1.0
    assert info["options"]["hidden"] > 0  # a created model records its size
    phases = info["phases_s"]
    assert phases["warmup"] > 0 and sum(phases.values()) <= info["wall_s"] + 1e-6
    assert info["warmup_loss_last"] < 0.7 * info["warmup_loss_first"]  # it learned the format
    assert info["copy_loss_last"] < info["copy_loss_first"]  # read-and-copy came first
    assert info["split"] == "envs/agentgym_envs/babyai/data/goto_train.json"  # no machine path
    model = AutoModelForCausalLM.from_pretrained(str(small_policy))
    assert model.config.head_dim == 64 and model.config.num_hidden_layers == 1
    # phrase tokens by default: multiword tokens on top of the word-level BPE
    added = json.loads((small_policy / "tokenizer.json").read_text())["added_tokens"]
    phrases = [t["content"] for t in added if not t["special"]]
    assert "There is a wall" in phrases and all(len(p.split()) > 1 for p in phrases)


def test_refuses_a_non_empty_folder_and_bad_sizes(small_policy: Path, tmp_path: Path) -> None:
    with pytest.raises(FileExistsError, match="--force"):
        init_policy(InitModelConfig(out=small_policy))
    assert main(["init-model", f"--out={small_policy}"]) == 2
    assert main(["init-model", f"--out={tmp_path / 'x'}", "--warmup-steps=0"]) == 2
    bad_weight = ["init-model", f"--out={tmp_path / 'x'}", "--warmup-observation-weight=2"]
    assert main(bad_weight) == 2


@pytest.mark.parametrize("weight", [0.0, 0.25, 1.0])
def test_warmup_loss_is_the_weighted_token_mean(
    small_policy: Path, tmp_path: Path, weight: float
) -> None:
    """The first step's loss (before any update) equals the target-weighted mean of the
    per-token NLL, computed here independently by the HF model on each transcript alone."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Goal: go to red ball"},
        {"role": "assistant", "content": "Action: go to red ball 1"},
        {"role": "user", "content": "You see a wall."},
        {"role": "assistant", "content": "Action: turn left"},
    ]
    short = messages[:3]
    model_dir = tmp_path / "policy"
    shutil.copytree(small_policy, model_dir)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    total, mass = 0.0, 0.0
    for chat in (messages, short):
        enc = encode(tok, chat, observation_weight=weight)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([enc.ids])).logits[0, :-1]
        nll = torch.nn.functional.cross_entropy(logits, torch.tensor(enc.ids[1:]), reduction="none")
        w = torch.tensor(enc.weights[1:])
        total, mass = total + float((nll * w).sum()), mass + float(w.sum())
    transcripts = [Transcript("a", messages, False), Transcript("b", short, False)]
    (loss,) = format_warmup(
        model_dir, transcripts, steps=1, batch_size=2, threads=1, observation_weight=weight
    )
    assert loss == pytest.approx(total / mass, rel=1e-5)


def test_searchqa_transcripts_search_then_answer_in_tags() -> None:
    """SearchQA plays its own random actions, written as bare tags (the format its turns stop
    at): a search of the question's words first, answers only after passages were shown."""
    split = ROOT / "envs/agentgym_envs/searchqa/data/train_1hop.json"
    tasks = load_split(split, "searchqa")[:40]
    options = {"prompt": "question", "topk": "2", "end_on_wrong": "true"}
    played = play_transcripts("searchqa", tasks, turn_cap=3, seed=0, env_options=options)
    answered = 0
    for t in played:
        turns = [m["content"] for m in t.messages if m["role"] == "assistant"]
        parsed = [parse_action(x, ActionFormat.TAGS) for x in turns]
        assert all(
            p.action is not None and p.action.replace(" ", "") == x.replace(" ", "")
            for p, x in zip(parsed, turns, strict=True)
        )
        assert turns[0].startswith("<search> ")
        answered += turns[-1].startswith("<answer> ")
        assert all(m["content"].startswith("<information>") for m in t.messages[3::2])
    assert 0 < answered < len(played)


SEARCHQA_DATA = ROOT / "envs/agentgym_envs/searchqa/data"


def test_a_short_split_is_replayed_with_fresh_random_actions(tmp_path: Path) -> None:
    """More transcripts than tasks play each task several times, each time with other random
    actions: the warm-up then cannot memorise one answer per question."""
    split = load_split(SEARCHQA_DATA / "train_1hop.json", "searchqa")[:5]
    tasks = tasks_to_play(split, 40, seed=0)
    assert len(tasks) == 40 and {t.item_id for t in tasks} == {t.item_id for t in split}
    options = {"prompt": "question", "topk": "1", "end_on_wrong": "true"}
    played = play_transcripts("searchqa", tasks, turn_cap=3, seed=0, env_options=options)
    plays: dict[str, set[str]] = {}
    for t in played:
        plays.setdefault(t.item_id, set()).add(json.dumps(t.messages))
    assert all(len(distinct) > 1 for distinct in plays.values())


def test_init_model_says_how_far_the_transcripts_are(tmp_path: Path) -> None:
    """Playing transcripts can take minutes (a browser env): a line every tenth of them."""
    said: list[str] = []
    options = InitModelConfig(
        out=tmp_path / "policy", transcripts=20, turn_cap=2, split=GOTO_TRAIN, **_TOKENIZER_ONLY
    )
    init_policy(options, say=said.append)
    played = [line for line in said if line.startswith("played ")]
    assert [line.split(" (")[0] for line in played] == [f"played {k}/20" for k in range(2, 20, 2)]
    assert said.index(played[0]) > said.index("playing 20 babyai tasks with random valid actions")


def test_searchqa_tokenizer_learns_the_corpus_names_the_warmup_never_met(tmp_path: Path) -> None:
    """The tokenizer also reads the env's reference text (SearchQA: its passages), so the names
    in held-out answers are whole tokens although four transcripts never showed them."""
    from transformers import AutoTokenizer

    out = tmp_path / "policy"
    options = InitModelConfig(
        out=out,
        env="searchqa",
        split=SEARCHQA_DATA / "train_1hop.json",
        transcripts=4,
        turn_cap=3,
        env_options=["prompt=question", "topk=1", "end_on_wrong=true"],
        vocab_size=8000,
        phrase_tokens=False,
        **_TOKENIZER_ONLY,
    )
    init_policy(options, say=lambda _: None)
    tok = AutoTokenizer.from_pretrained(str(out))
    held_out = {t.item_id for t in load_split(SEARCHQA_DATA / "test_1hop.json", "searchqa")}
    questions = [json.loads(line) for line in (SEARCHQA_DATA / "questions.jsonl").open()]
    words = [w for q in questions if q["id"] in held_out for w in q["golden_answers"][0].split()]
    whole = sum(len(tok.encode(" " + w, add_special_tokens=False)) == 1 for w in words)
    assert whole / len(words) > 0.95


@pytest.mark.parametrize("lexicon_tokens", [True, False])
def test_textcraft_item_names_are_one_token_each(tmp_path: Path, lexicon_tokens: bool) -> None:
    """With lexicon tokens every item name of the env, even one the few transcripts never
    showed, encodes after a space as one token (a tiny policy copies it as one choice); without
    them a rare name falls apart into BPE pieces."""
    from transformers import AutoTokenizer

    from agentgym_envs.textcraft.env import TextCraftEnvironment

    out = tmp_path / "policy"
    options = InitModelConfig(
        out=out,
        env="textcraft",
        transcripts=4,
        turn_cap=2,
        lexicon_tokens=lexicon_tokens,
        **_TOKENIZER_ONLY,
    )
    record = init_policy(options, say=lambda _: None)
    tok = AutoTokenizer.from_pretrained(str(out))
    names = list(TextCraftEnvironment().lexicon())
    assert "oak planks" in names and len(names) > 600
    whole = [len(tok.encode(" " + name, add_special_tokens=False)) == 1 for name in names]
    if lexicon_tokens:
        assert all(whole) and record["lexicon_tokens"] == len(names)
        # a listed command splits at the names: counts and 'using' stay their own tokens
        pieces = tok.tokenize("craft 2 dark oak slab using 1 dark oak planks")
        assert [tok.convert_tokens_to_string([p]) for p in pieces][-4:] == [
            " using",
            " ",
            "1",
            " dark oak planks",
        ]
        assert tok.decode(tok.encode("get 6 cobblestone wall")) == "get 6 cobblestone wall"
        # the Rust core's tokenizer (trajectories, drift checks) splits a turn the same way
        turn = "Got 1 oak log\nCrafting commands:\ncraft 4 oak planks using 1 oak log"
        core = ChatTokenizer.from_dir(out).encode(turn).tolist()
        assert core == tok.encode(turn, add_special_tokens=False)
    else:
        assert sum(whole) < len(names) / 2 and record["lexicon_tokens"] == 0


def test_tool_transcripts_write_calls_of_the_envs_tools(small_policy: Path) -> None:
    """Tool-mode transcripts: each random action as the call of the tool that writes it, the
    results as tool messages, the schemas on the transcript; the warm-up's per-message encoding
    equals the created template's whole render with tools; the call's fixed text becomes
    tokens of its own."""
    from transformers import AutoTokenizer

    from agentgym_rl.config import ActionFormat
    from agentgym_rl.env_discovery import env_traits
    from agentgym_rl.episode.tools import ToolFamily, ToolReader, ToolSet
    from agentgym_rl.policy_creation.transcripts import call_pieces

    tasks = load_split("train", "babyai")[:3]
    played = play_transcripts("babyai", tasks, turn_cap=3, action_format=ActionFormat.TOOLS)
    reader = ToolReader(ToolSet.from_wire(env_traits("babyai").tools), ToolFamily.HERMES)
    for t in played:
        assert t.tools == reader.tools.schemas
        replies = [m for m in t.messages if m["role"] == "assistant"]
        assert replies and all(reader.read(m["content"], 0).steps[0].action for m in replies)
        assert {m["role"] for m in t.messages[2:]} <= {"assistant", "tool"}
    pieces = call_pieces(played)
    assert '<tool_call>\n{"name": "go_to", "arguments": {"object": "' in pieces
    assert '"}}\n</tool_call>' in pieces
    tok = AutoTokenizer.from_pretrained(str(small_policy))
    whole = tok.apply_chat_template(played[0].messages, tools=played[0].tools, tokenize=False)
    enc = encode(tok, played[0].messages, tools=played[0].tools)
    assert enc.ids == tok.encode(whole, add_special_tokens=False)


def test_rule_transcripts_play_the_envs_rule_and_a_rule_less_env_refuses() -> None:
    """The imitation probe's transcripts: every action is the rule's (the goal's action when
    listed, else a left turn), and most episodes succeed, unlike random play."""
    from agentgym_envs.babyai.env import fits_mission

    tasks = load_split(Path("envs/agentgym_envs/babyai/data/distractor_train.json"), "babyai")
    compact = {"observation": "compact"}
    played = play_transcripts(
        "babyai", tasks[:30], turn_cap=5, env_options=compact, policy="rule", thought_line="Goal:"
    )
    assert sum(t.success for t in played) >= 28
    for t in played:
        goal = t.messages[1]["content"].splitlines()[0].removeprefix("Goal: ")
        for reply in (m["content"] for m in t.messages if m["role"] == "assistant"):
            thought, action = reply.splitlines()
            assert thought == f"Thought: {goal}"
            action = action.removeprefix("Action: ")
            assert action == "turn left" or fits_mission(action, goal)
    with pytest.raises(ValueError, match="declares no scripted rule"):
        play_transcripts(
            "noop",
            load_split(Path("envs/agentgym_envs/babyai/data/distractor_train.json"), "babyai")[:1],
            turn_cap=1,
            policy="rule",
        )
