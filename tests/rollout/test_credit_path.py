"""Credit through the whole path: a real BabyAI server, the rollout service (scripted engine,
real trajectory builder), the Rust wire, the learner's decode, batch and GRPO advantages. Every
turn's generated tokens, the second and third as much as the first, are trained with exactly the
episode's advantage, and nothing else is: not the prompt, not the observations between turns;
with step-level credit, the step advantage lands on the turns that shared a state alone.
The learner's record of what each sample trained with joins the rollout's episode log by the
request id the sample carries on the wire."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
import uvloop
from harness import ScriptedEngine
from test_dispatcher import service_config

from agentgym_rl import _core
from agentgym_rl.config.learn import StepCreditConfig
from agentgym_rl.episode.log import read_episodes
from agentgym_rl.learner.advantages import compute_advantages
from agentgym_rl.learner.batch import collate, usable_samples
from agentgym_rl.learner.credit_log import TrainedLog, read_trained, trained_samples
from agentgym_rl.learner.step_credit import add_step_credit, turns_of
from agentgym_rl.rollout.service import run_service
from agentgym_rl.wire.codec import decode_group


def _two_kinds(prompt: str, request_id: str) -> str:
    """Episode 0 of a group turns (valid, 0 reward); episode 1 asks for something unavailable
    every turn (invalid, -0.3 with the penalty): every group has two different rewards."""
    action = "turn left" if "-e0-" in request_id else "go to the moon 1"
    return f"Thought: the goal.\nAction: {action}"


def _groups(config, engine: ScriptedEngine, chat, endpoint: str, n: int) -> list:
    """Run the rollout service until `n` groups arrived at a real receiver, stop it as in
    production (SIGTERM) and decode them."""

    async def main() -> list[bytes]:
        payloads: list[bytes] = []
        with _core.GroupReceiver(endpoint) as receiver:
            task = asyncio.create_task(run_service(config, engine, chat=chat, quiet=True))
            while len(payloads) < n:
                got = await asyncio.to_thread(receiver.recv, 0.2)
                if got is not None:
                    payloads.append(bytes(got[1]))
            os.kill(os.getpid(), signal.SIGTERM)
            while not task.done():
                await asyncio.to_thread(receiver.recv, 0.05)
            await task
        return payloads

    return [decode_group(p) for p in uvloop.run(main())]


def test_every_turn_carries_the_episode_advantage_and_only_its_generated_tokens(
    babyai_server, chat, free_port, tmp_path: Path
) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port}"
    config = service_config(babyai_server, endpoint, tmp_path, "envs.0.invalid_penalty=0.3")
    groups = _groups(config, ScriptedEngine(chat, _two_kinds), chat, endpoint, 3)
    batch = collate(groups, pad_token_id=0)
    adv = compute_advantages("grpo", batch.rewards, batch.group_ids, batch.loss_mask)
    samples = [s for g in groups for s in g.samples]
    assert len(samples) == 6 and batch.input_ids.shape[0] == 6
    rewards = batch.rewards.tolist()
    for row, sample in enumerate(samples):
        mask = np.asarray(sample.tokens.loss_mask, dtype=bool)
        ids = np.asarray(sample.tokens.input_ids).astype(np.int64)
        assert sample.turns == 3 and sample.turn_cap == 3  # every episode used the whole cap
        # the wire's mask covers exactly the three generated turns, nothing between them
        runs = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int), [0]])))
        spans = runs.reshape(-1, 2)
        assert len(spans) == 3
        for start, end in spans:
            text = chat.decode(ids[start:end].tolist())
            assert text.startswith("Thought: the goal.\nAction: ")
        # shifted by one: position t trains the token at t + 1, with the episode's advantage
        trained = batch.loss_mask[row].bool()
        n = len(ids)
        assert trained[: n - 1].tolist() == mask[1:].tolist() and not trained[n - 1 :].any()
        assert torch.equal(
            batch.labels[row, : n - 1][trained[: n - 1]], torch.tensor(ids[1:][mask[1:]])
        )
        group = [r for r in range(6) if batch.group_ids[r] == batch.group_ids[row]]
        mine, other = rewards[row], rewards[next(r for r in group if r != row)]
        expected = (mine - (mine + other) / 2) / (abs(mine - other) / 2**0.5 + 1e-6)
        assert torch.allclose(adv[row][trained], torch.tensor(expected, dtype=torch.float32))
        assert not adv[row][~trained].any()
        second_turn = slice(int(spans[1][0]) - 1, int(spans[1][1]) - 1)
        assert trained[second_turn].all()
        assert torch.allclose(adv[row][second_turn], torch.tensor(expected, dtype=torch.float32))
    assert sorted(set(round(r, 6) for r in rewards)) == [-0.3, 0.0]

    # the learner's record: per turn, the advantage each sample's tokens trained with
    rows = usable_samples(groups)
    trained = trained_samples(groups, rows, adv.numpy(), batch.loss_mask.numpy(), step=1)
    log = TrainedLog(tmp_path / "learn")
    log.append(trained)
    by_id = read_trained(tmp_path / "learn")
    episodes = {e.request_id: e for e in read_episodes(tmp_path / "episodes.jsonl")}
    assert len(by_id) == 6 and set(by_id) <= set(episodes)  # every trained sample joins
    for row, t in enumerate(trained):
        (logged,) = by_id[t.request_id]
        assert logged == t and t.step == 1 and t.reward == rewards[row]
        assert t.reward == episodes[t.request_id].reward
        expected = float(adv[row][batch.loss_mask[row].bool()][0])
        spans = samples[row].tokens.turn_spans.tolist()
        assert t.turn_tokens == [end - start for start, end in spans]  # every generated token
        assert all(abs(a - expected) < 1e-3 for a in t.turn_advantages)

    # the rollout metrics by turn index: every turn of the valid episodes turned, every turn of
    # the invalid ones named an unavailable "go to" and counted as invalid; each episode says
    # one action again and again, so every turn after the first is a repeat
    metrics = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    by_turn = metrics[-1]["by_turn"]
    assert set(by_turn) == {"1", "2", "3"}
    for turn, counts in by_turn.items():
        assert set(counts["kinds"]) == {"turn", "go"}
        assert counts["invalid"] == counts["kinds"]["go"]
        assert counts["turns"] == counts["kinds"]["turn"] + counts["kinds"]["go"]
        assert counts["repeated"] == (0 if turn == "1" else counts["turns"])
    assert metrics[-1]["repeated_actions"] == by_turn["2"]["turns"] + by_turn["3"]["turns"]

    # step-level credit on the same groups: per turn the reward it earned (summing to the
    # episode's: each refusal carries its own share of the penalty, -0.3 / 3) and the state it
    # acted from came over the wire. Both episodes of a group acted first from the task's first
    # observation; the turning one then from new views, the refused one again and again from
    # that same state (a refusal changes nothing). The step group of that state, returns
    # discounted by 0.95 from each turn on: 0 (the turner's first turn) and the refuser's
    # -0.28525, -0.195, -0.1 (a later refusal has fewer refusals ahead of it)
    step = StepCreditConfig(weight=0.5)
    assert step.turn_gamma == 0.95  # GiGPO's
    credited = add_step_credit(adv, batch.loss_mask, turns_of(rows), step)
    returns = [-0.1 - 0.95 * 0.1 - 0.95**2 * 0.1, -0.1 - 0.95 * 0.1, -0.1]
    shared = np.array([0.0, *returns])
    mean, std = shared.mean(), float(np.std(shared, ddof=1))
    for row, sample in enumerate(samples):
        assert sample.turn_rewards.sum() == pytest.approx(sample.reward)
        partner = next(
            r for r in range(6) if batch.group_ids[r] == batch.group_ids[row] and r != row
        )
        keys, theirs = sample.turn_keys.tolist(), samples[partner].turn_keys.tolist()
        assert len(keys) == len(sample.tokens.turn_spans) == 3 and keys[0] == theirs[0]
        refused = rewards[row] < 0
        if refused:
            assert keys == [keys[0]] * 3
            assert sample.turn_rewards.tolist() == pytest.approx([-0.1] * 3)
            expected_step = [(g - mean) / (std + 1e-6) for g in returns]
        else:
            assert len(set(keys)) == 3 and not set(keys[1:]) & set(theirs)
            assert sample.turn_rewards.tolist() == [0.0] * 3
            expected_step = [(0.0 - mean) / (std + 1e-6), 0.0, 0.0]
        for (start, end), value in zip(
            sample.tokens.turn_spans.tolist(), expected_step, strict=True
        ):
            turn = slice(start - 1, end - 1)
            assert torch.allclose(credited[row][turn], adv[row][turn] + 0.5 * value, atol=1e-5)
        assert not credited[row][~batch.loss_mask[row].bool()].any()


def test_step_wise_context_trains_each_turn_as_a_sample_of_its_episode(
    babyai_server, chat, free_port, tmp_path: Path
) -> None:
    """`context.history_turns: 1` through the same path: each turn is a sample whose prompt is
    the prefix and the last turn, the wire names each sample's episode, GRPO scores each episode
    once, and the episode log holds each episode as one record of its parts."""
    endpoint = f"tcp://127.0.0.1:{free_port}"
    config = service_config(
        babyai_server,
        endpoint,
        tmp_path,
        "envs.0.invalid_penalty=0.3",
        "envs.0.context.history_turns=1",
    )
    groups = _groups(config, ScriptedEngine(chat, _two_kinds), chat, endpoint, 2)
    for g in groups:
        # two episodes of three turns, a sample per turn, each naming its episode
        assert [s.episode for s in g.samples] == [0, 0, 0, 1, 1, 1]
        for e in (0, 1):
            parts = g.samples[3 * e : 3 * e + 3]
            base = parts[0].request_id
            assert [p.request_id for p in parts] == [base, f"{base}/s1", f"{base}/s2"]
            assert len({(p.reward, p.status.value, p.turns) for p in parts}) == 1
            assert sum(float(p.turn_rewards[0]) for p in parts) == pytest.approx(parts[0].reward)
            for k, p in enumerate(parts):
                ids = np.asarray(p.tokens.input_ids).astype(np.int64)
                ((start, end),) = p.tokens.turn_spans.tolist()
                assert end == len(ids) and p.tokens.loss_mask[start:].all()
                assert not p.tokens.loss_mask[:start].any()
                prompt = chat.decode(ids[:start].tolist())
                # the window: the previous reply once, none older (the same text each turn)
                assert prompt.count("Thought: the goal.") == min(k, 1)
    batch = collate(groups, pad_token_id=0)
    assert batch.episode_ids.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    adv = compute_advantages(
        "grpo", batch.rewards, batch.group_ids, batch.loss_mask, episode_ids=batch.episode_ids
    )
    for row in range(12):
        trained = batch.loss_mask[row].bool()
        # two episodes a group, rewards 0 and -0.3: +-0.707 whatever their parts
        sign = 1.0 if batch.rewards[row] == 0.0 else -1.0
        expected = sign * 0.15 / (0.3 / 2**0.5 + 1e-6)
        assert torch.allclose(adv[row][trained], torch.tensor(expected, dtype=torch.float32))
        assert not adv[row][~trained].any()
    records = list(read_episodes(tmp_path / "episodes.jsonl"))
    assert len(records) >= 4 and all(r.parts is not None and len(r.parts) == 3 for r in records)
