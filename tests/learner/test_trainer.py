"""The learner loop on a tiny Qwen2: real transport in, real weight stream out, checkpoints."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import msgpack
import numpy as np
import pytest
import torch
from trainer_fixtures import learn_config, make_group

from agentgym_rl.learner import source as source_mod
from agentgym_rl.learner import trainer as trainer_mod
from agentgym_rl.learner.checkpoint import load_checkpoint, save_checkpoint
from agentgym_rl.learner.checkpoint_dirs import complete_checkpoints, latest_checkpoint
from agentgym_rl.learner.convert import export_hf_weights
from agentgym_rl.learner.credit_log import read_trained
from agentgym_rl.learner.trainer import Trainer
from agentgym_rl.wire import (
    GroupReceiver,
    GroupSender,
    Status,
    WireGroup,
    WireSample,
    WireTokens,
    encode_group,
)
from vllm_fixtures import tiny_corpus

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agentgym_rl.policy_creation import create_tiny_model

    out = tmp_path_factory.mktemp("learner-tiny")
    return create_tiny_model(out, corpus=tiny_corpus(), vocab_size=320, seed=0)


@pytest.fixture
def make_trainer() -> Iterator:
    made: list[Trainer] = []

    def make(config, **kw) -> Trainer:  # type: ignore[no-untyped-def]
        t = Trainer(config, **kw)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


def _vocab(model_dir: Path) -> int:
    return int(json.loads((model_dir / "config.json").read_text())["vocab_size"])


def _params(t: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in t.model.named_parameters()}


def test_loss_decreases_on_a_fixed_batch(model_dir: Path, tmp_path: Path, make_trainer) -> None:
    t = make_trainer(learn_config(model_dir, tmp_path))
    vocab = _vocab(model_dir)
    groups = [make_group(g, vocab=vocab) for g in range(2)]
    losses = [t.train_step(groups)["loss"] for _ in range(6)]
    assert t.version == 6
    assert losses[-1] < losses[0] - 0.05, losses
    m = t.train_step(groups)
    assert m["micro_batches"] >= 2  # 8 rows x 18 tokens over a 64-token budget
    assert 0.0 <= m["clip_frac"] <= 1.0 and m["tokens"] == 8 * 18


def test_a_step_reports_the_share_of_its_computed_tokens_that_were_real_and_trained(
    model_dir: Path, tmp_path: Path, make_trainer
) -> None:
    """Four rows of 18 tokens, two cut to 14 and two to 11 (prompt and first turn, then part of
    the observation), micro-batches of at most 64 padded tokens: the fewest is 3, and the
    cheapest three are [18, 18, 18], [18], [14, 14, 11, 11] at width 14: 128 tokens computed for
    122 real ones, 56 of them trained (9, 5 and 5 a row)."""
    t = make_trainer(learn_config(model_dir, tmp_path))
    vocab = _vocab(model_dir)
    long, short = make_group(0, vocab=vocab), make_group(1, vocab=vocab)
    cut = [
        replace(
            s,
            tokens=WireTokens(
                input_ids=s.tokens.input_ids[:n],
                loss_mask=s.tokens.loss_mask[:n],
                logprobs=s.tokens.logprobs[:n],
                versions=s.tokens.versions[:n],
                turn_spans=s.tokens.turn_spans[:1],
            ),
            turns=1,
        )
        for s, n in zip(short.samples, [14, 14, 11, 11], strict=True)
    ]
    m = t.train_step([long, replace(short, samples=cut)])
    assert (m["tokens"], m["loss_tokens"], m["computed_tokens"]) == (122, 56, 128)
    assert m["micro_batches"] == 3
    assert m["real_token_share"] == pytest.approx(122 / 128)
    assert m["trained_token_share"] == pytest.approx(56 / 128)


def test_step_credit_lands_on_the_turns_that_shared_a_state(
    model_dir: Path, tmp_path: Path, make_trainer
) -> None:
    """With `advantage.step` (here over RLOO), the first turns, which every episode of a group
    took from the task's state, train with the episode advantage plus half the step advantage;
    the second turns, each from a state of its own, with the episode advantage alone."""
    step = {"estimator": "rloo", "step": {"weight": 0.5}}
    t = make_trainer(learn_config(model_dir, tmp_path, advantage=step))
    vocab = _vocab(model_dir)
    groups = []
    for g in range(2):
        group = make_group(g, vocab=vocab)  # rewards 0, 1, 0, 1
        samples = [
            replace(
                s,
                turn_rewards=np.array([0.0, s.reward], np.float32),
                turn_keys=np.array([1, 10 + i], np.uint32),
            )
            for i, s in enumerate(group.samples)
        ]
        groups.append(replace(group, samples=samples))
    t.train_step(groups)
    episode, step_adv = 1 - 1 / 3, 0.5 / (np.std([0, 1, 0, 1], ddof=1) + 1e-6)
    for g in groups:
        for s in g.samples:
            (trained,) = read_trained(tmp_path / "logs")[s.request_id]
            sign = 1.0 if s.reward > 0 else -1.0
            first, second = trained.turn_advantages
            assert first == pytest.approx(sign * (episode + 0.5 * step_adv), abs=1e-4)
            assert second == pytest.approx(sign * episode, abs=1e-4)


def test_groups_over_transport_bad_ones_rejected(
    model_dir: Path, tmp_path: Path, make_trainer
) -> None:
    vocab = _vocab(model_dir)
    receiver = GroupReceiver("tcp://127.0.0.1:0", window=32)
    cfg = learn_config(model_dir, tmp_path, max_steps=2, max_staleness=1)
    t = make_trainer(cfg, receiver=receiver)
    good = [encode_group(make_group(g, vocab=vocab)) for g in range(4)]
    nan = make_group(10, vocab=vocab, rewards=[float("nan"), 0.0, 1.0, 0.0])
    short = make_group(11, vocab=vocab)
    s0 = short.samples[0]
    bad_tokens = replace(s0.tokens, logprobs=s0.tokens.logprobs[:-1])
    short.samples[0] = replace(s0, tokens=bad_tokens)
    oov = make_group(12, vocab=vocab)
    o0 = oov.samples[0]
    ids = o0.tokens.input_ids.copy()
    ids[3] = vocab + 5
    oov.samples[0] = replace(o0, tokens=replace(o0.tokens, input_ids=ids))
    wrong_schema = msgpack.unpackb(good[0], raw=False)
    wrong_schema["v"] = 99
    stale = make_group(13, vocab=vocab, version=0)
    payloads = [
        encode_group(nan),
        encode_group(short),
        encode_group(oov),
        msgpack.packb(wrong_schema, use_bin_type=True),
        b"\x93garbage",
        good[0],
        good[1],
        good[2],
        good[3],
    ]
    with GroupSender(receiver.endpoint, "rollout-test") as sender:
        sender.wait_connected(10)
        for p in payloads:
            sender.send(p, timeout_s=10)
        assert t.run() == 2
        # policy is now v2: a group whose tokens are from v0 is 2 > max_staleness versions old
        sender.send(encode_group(stale), timeout_s=10)
        got = receiver.recv(10)
        assert got is not None and t.intake.admit(got[1], t.version) is None
    receiver.close()
    counters = t.intake.counters()
    assert counters["rejected"] == {
        "nan_reward": 1,
        "length_mismatch": 1,
        "token_out_of_vocab": 1,
        "schema_version": 1,
        "wire_format": 1,
    }
    assert counters["dropped_stale"] == 1
    assert counters["received"] == 10 and counters["used"] == 4
    lines = [json.loads(x) for x in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]
    assert lines[-1]["groups_rejected"] == 5 and lines[-1]["groups_used"] == 4
    for key in ("loss", "clip_frac", "mismatch_kl", "tokens_per_s", "sync_s", "groups_dropped"):
        assert key in lines[-1]
    # both turns of every sample train with its episode's advantage: the mean by turn is ~0
    assert set(lines[-1]["adv_by_turn"]) == {"1", "2"}
    assert all(abs(v) < 1e-3 for v in lines[-1]["adv_by_turn"].values())
    # what each sample trained with, by the request id it carried on the wire
    trained = read_trained(tmp_path / "logs")
    assert sorted(trained) == sorted(f"g{g}-e{i}" for g in range(4) for i in range(4))
    for rid, (t,) in trained.items():
        assert t.step in (1, 2) and t.turn_tokens == [5, 4] and t.env == "babyai"
        a1, a2 = t.turn_advantages
        assert a1 == a2 and (a1 > 0) == (t.reward > 0), rid
    assert latest_checkpoint(tmp_path / "ckpt") is not None  # the last step is saved


def test_weights_published_with_versions(model_dir: Path, tmp_path: Path, make_trainer) -> None:
    from agentgym_rl.weights.publisher import WeightPublisher
    from agentgym_rl.weights.subscriber import WeightSubscriber

    vocab = _vocab(model_dir)
    publisher = WeightPublisher("tcp://127.0.0.1:0")
    receiver = GroupReceiver("tcp://127.0.0.1:0", window=32)
    cfg = learn_config(
        model_dir, tmp_path, max_steps=2, weights={"endpoint": "tcp://127.0.0.1:1", "timeout_s": 10}
    )
    t = make_trainer(cfg, receiver=receiver, publisher=publisher)
    got: dict[int, dict[str, torch.Tensor]] = {}
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def apply(version: int, tensors: dict[str, torch.Tensor]) -> None:
        got[version] = {k: v.clone() for k, v in tensors.items()}

    async def make() -> tuple[WeightSubscriber, asyncio.Event]:
        return WeightSubscriber(publisher.endpoint, server_id="rollout-0"), asyncio.Event()

    sub, stop = asyncio.run_coroutine_threadsafe(make(), loop).result(10)
    task = asyncio.run_coroutine_threadsafe(sub.serve(apply, stop), loop)
    try:
        assert publisher.wait_for_servers(1, timeout_s=10) == 1
        with GroupSender(receiver.endpoint, "rollout-test") as sender:
            for g in range(4):
                sender.send(encode_group(make_group(g, vocab=vocab)), timeout_s=10)
            t.run()
        assert sorted(got) == [1, 2]
        assert t.last_publish.ok and t.last_publish.version == 2
        final = export_hf_weights(t.model, t.spec)
        assert got[2].keys() == final.keys()
        for name, tensor in final.items():
            assert torch.equal(got[2][name], tensor), name
        assert not torch.equal(got[1]["model.norm.weight"], got[2]["model.norm.weight"])
    finally:
        loop.call_soon_threadsafe(stop.set)
        task.result(10)
        sub.close()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        publisher.close()
        receiver.close()


def test_resume_matches_straight_run(model_dir: Path, tmp_path: Path, make_trainer) -> None:
    vocab = _vocab(model_dir)
    batches = [[make_group(g, vocab=vocab, seed=s) for g in range(2)] for s in range(4)]
    cfg = learn_config(model_dir, tmp_path, max_steps=4)
    straight = make_trainer(cfg)
    for b in batches:
        straight.train_step(b)
    want = _params(straight)
    straight.close()

    first = Trainer(cfg)
    for b in batches[:2]:
        first.train_step(b)
    path = save_checkpoint(first, cfg.checkpoint.dir)
    first.close()
    assert path.name == "step_2" and (path / "COMPLETE").is_file()
    # an interrupted save (no COMPLETE) is ignored
    (tmp_path / "ckpt" / "step_3").mkdir()
    assert latest_checkpoint(cfg.checkpoint.dir) == path

    second = make_trainer(cfg)
    load_checkpoint(second, latest_checkpoint(cfg.checkpoint.dir))  # type: ignore[arg-type]
    assert second.step == 2
    for b in batches[2:]:
        second.train_step(b)
    for name, tensor in _params(second).items():
        torch.testing.assert_close(tensor, want[name], rtol=1e-5, atol=1e-6)


def test_hf_export_loads_in_transformers(model_dir: Path, tmp_path: Path, make_trainer) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    vocab = _vocab(model_dir)
    cfg = learn_config(model_dir, tmp_path)
    t = make_trainer(cfg)
    t.train_step([make_group(g, vocab=vocab) for g in range(2)])
    path = save_checkpoint(t, cfg.checkpoint.dir)
    hf = AutoModelForCausalLM.from_pretrained(str(path / "hf"), dtype=torch.float32)
    AutoTokenizer.from_pretrained(str(path / "hf"))
    exported = export_hf_weights(t.model, t.spec)
    sd = hf.state_dict()
    for name, tensor in exported.items():
        assert torch.equal(sd[name], tensor), name
    ids = torch.tensor([[5, 6, 7, 8]])
    assert np.isfinite(hf(ids).logits.detach().numpy()).all()


def _engine_group(handle, group_id: int, n: int = 4) -> WireGroup:  # type: ignore[no-untyped-def]
    """`n` two-turn episodes from the engine: prompt, turn, observation, turn."""
    eng = handle.engine
    prompt, obs = [1, 20, 31, 42, 53, 64], [7, 8, 9]
    samples = []
    for i in range(n):
        ids, mask, lps, vers = list(prompt), [0] * len(prompt), [0.0] * len(prompt), [0] * 6
        for turn in range(2):
            g = handle.run(
                eng.generate(
                    ids, max_tokens=12, request_id=f"mkl-{group_id}-{i}-{turn}", seed=i * 7 + turn
                )
            )
            ids += g.token_ids
            mask += [1] * len(g.token_ids)
            lps += g.logprobs
            vers += g.versions
            if turn == 0:
                ids += obs
                mask += [0] * 3
                lps += [0.0] * 3
                vers += [0] * 3
        tokens = WireTokens(
            input_ids=np.array(ids, np.uint32),
            loss_mask=np.array(mask, np.uint8),
            logprobs=np.array(lps, np.float32),
            versions=np.array(vers, np.uint32),
            turn_spans=np.zeros((0, 2), np.uint32),
        )
        samples.append(WireSample(tokens, float(i % 2), Status.DONE, False, 2, 6, 0, eng.version))
    return WireGroup(group_id=group_id, task_id="t", env="babyai", samples=samples)


def test_mismatch_kl_against_vllm_is_zero(vllm_engine, tmp_path: Path, make_trainer) -> None:  # type: ignore[no-untyped-def]
    """Same checkpoint in vLLM (processed log-probs at T) and the learner: log-probs agree."""
    from agentgym_rl.learner import model as lm
    from agentgym_rl.learner.batch import collate
    from agentgym_rl.learner.convert import load_hf_weights
    from vllm_fixtures import TEMPERATURE

    groups = [_engine_group(vllm_engine, g) for g in range(2)]
    cfg = learn_config(vllm_engine.model_dir, tmp_path, temperature=TEMPERATURE)
    t = make_trainer(cfg)
    load_hf_weights(t.model, vllm_engine.weights, t.spec)  # the engine's current weights
    batch = collate(groups)
    with torch.no_grad():
        lp = lm.token_logprobs(
            t.model, batch.input_ids, batch.position_ids, batch.labels, TEMPERATURE
        )
    mask = batch.loss_mask.bool()
    diff = (lp[mask] - batch.behaviour_logprobs[mask]).abs()
    assert mask.sum() > 20
    assert float(diff.mean()) < 1e-4 and float(diff.max()) < 1e-3, diff
    m = t.train_step(groups)
    assert m["mismatch_kl"] < 1e-3


def test_kl_to_reference_starts_at_zero_and_grows(
    model_dir: Path, tmp_path: Path, make_trainer
) -> None:
    vocab = _vocab(model_dir)
    t = make_trainer(learn_config(model_dir, tmp_path, loss={"kl_coef": 0.1}))
    assert t.ref_model is not None and not t.ref_model.training
    assert not any(p.requires_grad for p in t.ref_model.parameters())
    ref_before = {k: v.clone() for k, v in t.ref_model.state_dict().items() if v is not None}
    groups = [make_group(g, vocab=vocab) for g in range(2)]
    kls = [t.train_step(groups)["kl_ref"] for _ in range(4)]
    assert kls[0] < 1e-8, kls  # policy == reference before the first update
    assert kls[-1] > 1e-4 and kls[-1] > kls[1], kls
    for k, v in t.ref_model.state_dict().items():
        if k in ref_before:
            assert torch.equal(v, ref_before[k]), k  # the reference stays frozen


def test_entropy_bonus_shifts_the_loss(model_dir: Path, tmp_path: Path) -> None:
    """On the same weights and batch: loss(coef) = loss(0) - coef * mean entropy; tracked
    without a bonus, the same entropy is logged and the loss is unchanged."""
    vocab = _vocab(model_dir)
    groups = [make_group(g, vocab=vocab) for g in range(2)]
    coef = 0.05
    plain = Trainer(learn_config(model_dir, tmp_path, token_log=None))
    base = plain.train_step(groups)
    plain.close()
    bonus = Trainer(learn_config(model_dir, tmp_path, loss={"entropy_coef": coef}))
    try:
        m = bonus.train_step(groups)
    finally:
        bonus.close()
    assert "entropy" not in base and 0.0 < m["entropy"] <= float(np.log(vocab)) + 1e-6
    assert m["pg_loss"] == pytest.approx(base["pg_loss"], abs=1e-6)
    assert m["loss"] == pytest.approx(base["loss"] - coef * m["entropy"], abs=1e-5)
    tracked = Trainer(
        learn_config(model_dir, tmp_path, loss={"track_entropy": True}, token_log=None)
    )
    try:
        seen = tracked.train_step(groups)
    finally:
        tracked.close()
    assert seen["entropy"] == pytest.approx(m["entropy"], abs=1e-6)
    assert seen["loss"] == pytest.approx(base["loss"], abs=1e-6)


def test_token_log_keeps_what_each_picked_token_trained_with(
    model_dir: Path, tmp_path: Path, make_trainer
) -> None:
    """A logged step's token records: the picked samples' trained tokens in order, the learner's
    log-probs those of a forward on the same weights, the behaviour ones the samples', entropies
    within [0, log V], and the TIS truncation (cap 1, behaviour log-prob M the median of the
    learner's: every token the learner finds likelier than M) marked clipped with weight 1, the
    others weighted exp(lp - M). Only every second step logs."""
    from agentgym_rl.learner import model as lm
    from agentgym_rl.learner.batch import collate, usable_samples
    from agentgym_rl.learner.token_log import pick_rows, read_tokens

    vocab = _vocab(model_dir)
    groups = [make_group(g, vocab=vocab) for g in range(2)]
    log = {"samples_per_step": 3, "every_steps": 2}
    t = make_trainer(learn_config(model_dir, tmp_path, loss={"tis_cap": 1.0}, token_log=log))
    first = t.train_step(groups)
    assert "token_log_bytes" not in first and not read_tokens(tmp_path / "logs")
    batch = collate(groups)
    mask = batch.loss_mask > 0
    with torch.no_grad():
        lp = lm.token_logprobs(t.model, batch.input_ids, batch.position_ids, batch.labels, 1.0)
    median = float(lp[mask].median())
    rows = usable_samples(groups)
    for _, sample in rows:  # the engine's log-prob of every generated token: the median
        sample.tokens.logprobs[sample.tokens.loss_mask > 0] = median
    m = t.train_step(groups)
    records = read_tokens(tmp_path / "logs")
    picked = pick_rows(len(rows), 3, 2)
    assert sorted(records) == sorted(rows[r][1].request_id for r in picked)
    assert m["token_log_bytes"] == (tmp_path / "logs" / "tokens.jsonl").stat().st_size
    for r in picked:
        rec = records[rows[r][1].request_id]
        want = lp[r][mask[r]].numpy()
        assert rec.step == 2 and len(rec) == int(mask[r].sum()) == 9
        assert np.allclose(rec.learner, want, atol=1e-2)  # float16 in the file
        assert np.allclose(rec.behaviour, median, atol=1e-2)
        assert rec.entropy is not None and (rec.entropy >= 0).all()
        assert (rec.entropy <= np.log(vocab) + 1e-2).all()
        assert np.allclose(rec.ratio, 1.0)  # proximal: the training forward's own
        assert np.allclose(rec.weight, np.minimum(np.exp(want - median), 1.0), atol=1e-2)
        sure = np.abs(want - median) > 1e-2  # float16 cannot tell those at the cap
        above = np.flatnonzero((want > median) & sure).tolist()
        assert [i for i in rec.clipped if sure[i]] == above
    assert any(rec.clipped for rec in records.values())
    assert any(len(rec.clipped) < len(rec) for rec in records.values())


class _DryReceiver:
    """Hands out the given payloads, then nothing: a rollout fleet that went away."""

    def __init__(self, payloads: list[bytes]) -> None:
        self.payloads = list(payloads)

    def recv(self, timeout_s: float = 1.0) -> tuple[str, bytes] | None:
        if self.payloads:
            return ("dry", self.payloads.pop(0))
        time.sleep(min(timeout_s, 0.05))
        return None


def test_idle_timeout_warns_checkpoints_and_stops(
    model_dir: Path, tmp_path: Path, make_trainer, caplog: pytest.LogCaptureFixture, monkeypatch
) -> None:
    monkeypatch.setattr(source_mod, "IDLE_WARN_S", 0.2)
    vocab = _vocab(model_dir)
    cfg = learn_config(
        model_dir, tmp_path, max_steps=5, receive={"idle_timeout_s": 1.0, "poll_s": 0.05}
    )
    groups = [encode_group(make_group(g, vocab=vocab)) for g in range(2)]
    t = make_trainer(cfg, receiver=_DryReceiver([*groups, b"\x93garbage"]))
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING), pytest.raises(trainer_mod.IdleTimeout) as err:
        t.run()
    assert 1.0 <= time.monotonic() - t0 < 30
    assert t.step == 1  # one step from the two groups, then silence
    msg = str(err.value)
    assert "no usable group for 1 s: no groups arrive from any rollout server" in msg
    assert "received so far: 3 groups, 2 used, 1 rejected" in msg and "receive.bind" in msg
    assert latest_checkpoint(tmp_path / "ckpt") == tmp_path / "ckpt" / "step_1"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        w.startswith("waiting") and "no groups arrive" in w and "received so far: 3" in w
        for w in warnings
    ), warnings


def test_a_stream_of_stale_groups_stops_the_learner_with_the_reason(
    model_dir: Path, tmp_path: Path, make_trainer, monkeypatch
) -> None:
    # a rollout server stuck at the base weights keeps sending v0 groups to a learner at v6
    monkeypatch.setattr(source_mod, "WAIT_NOTE_S", 0.2)
    vocab = _vocab(model_dir)
    cfg = learn_config(
        model_dir, tmp_path, max_steps=9, receive={"idle_timeout_s": 1.0, "poll_s": 0.05}
    )
    stale = [encode_group(make_group(g, vocab=vocab)) for g in range(40)]
    t = make_trainer(cfg, receiver=_DryReceiver(stale))
    t.step = 6
    with pytest.raises(trainer_mod.IdleTimeout) as err:
        t.run()
    assert t.step == 6  # silence is not what stopped it: groups kept arriving, all stale
    msg = str(err.value)
    assert "rollout servers are at v0, learner at v6" in msg
    assert "groups in a row dropped as stale" in msg
    notes = [
        json.loads(line) for line in (tmp_path / "logs" / "waiting.jsonl").read_text().splitlines()
    ]
    assert notes and "rollout servers are at v0" in notes[-1]["reason"]


def test_without_idle_timeout_a_stop_still_ends_the_wait(
    model_dir: Path, tmp_path: Path, make_trainer
) -> None:
    cfg = learn_config(model_dir, tmp_path, receive={"poll_s": 0.05, "idle_timeout_s": None})
    t = make_trainer(cfg, receiver=_DryReceiver([]))
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    assert t.run(stop) == 0 and t.idle_s is None  # waited (no timeout), left on the stop


def test_bf16_precision_steps_with_fp32_masters(
    model_dir: Path, tmp_path: Path, make_trainer
) -> None:
    vocab = _vocab(model_dir)
    t = make_trainer(learn_config(model_dir, tmp_path, precision="bf16"))
    assert t.autocast == torch.bfloat16
    before = _params(t)
    groups = [make_group(g, vocab=vocab) for g in range(2)]
    m = t.train_step(groups)
    assert np.isfinite(m["loss"]) and np.isfinite(m["grad_norm"]) and m["grad_norm"] > 0
    for name, p in t.model.named_parameters():
        assert p.dtype == torch.float32 and p.grad is not None, name
        assert p.grad.dtype == torch.float32, name
        assert all(v.dtype == torch.float32 for v in t.optimizer.state[p].values() if v.dim()), name
    assert any(not torch.equal(before[k], v) for k, v in _params(t).items())


def test_proximal_from_the_training_forward_equals_a_recompute(
    model_dir: Path, tmp_path: Path, make_trainer
) -> None:
    vocab = _vocab(model_dir)
    batches = [[make_group(g, vocab=vocab, seed=s) for g in range(2)] for s in range(3)]
    runs = []
    for recompute in (False, True):
        t = make_trainer(
            learn_config(model_dir, tmp_path / str(recompute), recompute_proximal=recompute)
        )
        metrics = [t.train_step(b) for b in batches]
        runs.append((_params(t), metrics))
    (fast, fast_m), (slow, slow_m) = runs
    for name, tensor in fast.items():
        torch.testing.assert_close(tensor, slow[name], rtol=0, atol=1e-6)
    for a, b in zip(fast_m, slow_m, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
        assert a["clip_frac"] == b["clip_frac"]


def test_a_stop_checkpoints_the_steps_taken(model_dir: Path, tmp_path: Path, make_trainer) -> None:
    vocab = _vocab(model_dir)
    payloads = [encode_group(make_group(g, vocab=vocab)) for g in range(2)]
    cfg = learn_config(model_dir, tmp_path, receive={"poll_s": 0.05})
    t = make_trainer(cfg, receiver=_DryReceiver(payloads))
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    assert t.run(stop) == 1  # one step from the two groups, then the stop (SIGTERM in `learn`)
    found = latest_checkpoint(cfg.checkpoint.dir)
    assert found is not None and found.name == "step_1"


def test_kill_9_during_checkpoint_writes_never_leaves_a_false_complete(
    model_dir: Path, tmp_path: Path
) -> None:
    """SIGKILL a process that checkpoints back to back: every checkpoint that looks complete
    loads, and the newest one is found while the interrupted one is ignored."""
    worker = Path(__file__).with_name("checkpoint_kill_worker.py")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(worker.parent), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [sys.executable, str(worker), str(model_dir), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "saving 4":
            break
    time.sleep(0.2)  # inside save 4 or a later one
    os.killpg(proc.pid, signal.SIGKILL)  # with its multiprocessing helpers, as a node's OOM kill
    proc.wait(timeout=30)
    root = tmp_path / "ckpt"
    complete = [step for step, _ in complete_checkpoints(root)]
    assert complete[:3] == [1, 2, 3], complete
    everything = sorted(p.name for p in root.iterdir())
    cfg = learn_config(model_dir, tmp_path)
    for step in complete:
        t = Trainer(cfg)
        try:
            load_checkpoint(t, root / f"step_{step}")
            assert t.step == step
        finally:
            t.close()
    latest = latest_checkpoint(root)
    assert latest is not None and latest.name == f"step_{complete[-1]}", everything
    # the save the kill interrupted left a `.tmp` folder (or nothing): never a COMPLETE marker
    assert all(name.startswith("step_") for name in everything)
    partial = [n for n in everything if n.endswith(".tmp")]
    assert all(not (root / n / "COMPLETE").exists() for n in partial)
