"""Policy loss variants, off-policy corrections and aggregation modes, hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from agentgym_rl.config.learn import Aggregation, LossConfig
from agentgym_rl.learner.losses import aggregate, clipped_surrogate, k3_kl, policy_loss

LN2 = math.log(2.0)
K3_LN2 = 2.0 - LN2 - 1.0  # exp(ln 2) - ln 2 - 1 = 0.306853


def t(x: list) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float32)


def logs(x: list) -> torch.Tensor:
    return torch.log(t(x))


def close(a: torch.Tensor, b: float | list) -> None:
    torch.testing.assert_close(a, torch.as_tensor(b, dtype=torch.float32), atol=1e-5, rtol=0)


def test_clip_higher_asymmetry() -> None:
    # proximal log-prob 0, so ratio = exp(logprobs)
    ratio = [1.5, 0.5, 1.25, 0.75, 1.5, 0.5]
    adv = t([[1.0, -1.0, 1.0, -1.0, -1.0, 1.0]])
    pg, low, high = clipped_surrogate(logs([ratio]), torch.zeros(1, 6), adv, 0.2, 0.28)
    # 1.5,+ -> -1.28 (high clip); 0.5,- -> 0.8 (low clip); 1.25,+ -> -1.25 (inside 1.28);
    # 0.75,- -> 0.8 (low clip); 1.5,- -> 1.5 and 0.5,+ -> -0.5 (pessimistic branch, unclipped)
    close(pg, [[-1.28, 0.8, -1.25, 0.8, 1.5, -0.5]])
    assert low.tolist() == [[False, True, False, True, False, False]]
    assert high.tolist() == [[True, False, False, False, False, False]]
    # symmetric 0.2: the 1.25 token is now clipped to 1.2
    pg_sym, _, high_sym = clipped_surrogate(logs([ratio]), torch.zeros(1, 6), adv, 0.2, 0.2)
    close(pg_sym[0, 2], -1.2)
    assert bool(high_sym[0, 2])


def test_clip_fraction_metrics() -> None:
    cfg = LossConfig(clip_eps_high=0.28, correction="none")
    cur = logs([[1.5, 0.5, 1.25, 0.75, 1.5, 0.5]])
    adv = t([[1.0, -1.0, 1.0, -1.0, -1.0, 1.0]])
    loss, m = policy_loss(
        cfg,
        logprobs=cur,
        behaviour_logprobs=torch.zeros(1, 6),
        advantages=adv,
        loss_mask=torch.ones(1, 6),
    )
    close(loss, (-1.28 + 0.8 - 1.25 + 0.8 + 1.5 - 0.5) / 6)
    close(m["clip_frac"], 3 / 6)
    close(m["clip_frac_low"], 2 / 6)
    close(m["clip_frac_high"], 1 / 6)


def run(cfg: LossConfig, **kw: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    n = kw["logprobs"].shape[1]
    kw.setdefault("advantages", torch.ones(1, n))
    kw.setdefault("loss_mask", torch.ones(1, n))
    return policy_loss(cfg, **kw)  # type: ignore[arg-type]


def test_tis_cap() -> None:
    # current == proximal (ratio 1, A = 1, pg = -1); proximal/behaviour = 3 and 0.5
    prox = t([[-1.0, -2.0]])
    behav = prox - logs([[3.0, 0.5]])
    loss, m = run(LossConfig(), logprobs=prox, proximal_logprobs=prox, behaviour_logprobs=behav)
    close(loss, -(2.0 + 0.5) / 2)  # weight min(3, 2) = 2 and 0.5
    close(m["tis_weight_mean"], 1.25)
    close(m["tis_weight_max"], 2.0)
    loss5, _ = run(
        LossConfig(tis_cap=5.0), logprobs=prox, proximal_logprobs=prox, behaviour_logprobs=behav
    )
    close(loss5, -(3.0 + 0.5) / 2)


def test_decoupled_weights_and_cap() -> None:
    prox = t([[-1.0, -2.0]])
    behav = prox - logs([[3.0, 0.5]])
    kw = dict(logprobs=prox, proximal_logprobs=prox, behaviour_logprobs=behav)
    loss, m = run(LossConfig(correction="decoupled"), **kw)
    close(loss, -(3.0 + 0.5) / 2)
    close(m["is_dropped_frac"], 0.0)
    capped, m = run(LossConfig(correction="decoupled", decoupled_cap=2.5), **kw)
    close(capped, -(0.0 + 0.5) / 2)  # the token with weight 3 > 2.5 is dropped
    close(m["is_dropped_frac"], 0.5)
    plain, m = run(LossConfig(correction="none"), **kw)
    close(plain, -1.0)
    close(m["tis_weight_mean"], 1.0)


def test_decoupled_ratio_is_against_proximal_not_behaviour() -> None:
    # current/proximal = 1.1 (inside the clip), proximal/behaviour = 2: loss = -2 * 1.1 = -2.2.
    # Clipping against behaviour instead would use ratio 2.2 -> 1.2 and give -1.2 * 2 = -2.4.
    prox = t([[-1.0]])
    cur = prox + math.log(1.1)
    behav = prox - LN2
    for cfg in (LossConfig(correction="decoupled"), LossConfig(tis_cap=2.0)):
        loss, m = run(cfg, logprobs=cur, proximal_logprobs=prox, behaviour_logprobs=behav)
        close(loss, -2.2)
        close(m["clip_frac"], 0.0)
        close(m["mismatch_kl"], K3_LN2)  # k3 with d = proximal - behaviour = ln 2


def test_k3_kl_nonnegative_zero_when_equal_and_hand_value() -> None:
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 16, generator=gen), torch.randn(4, 16, generator=gen)
    assert bool((k3_kl(a, b) >= 0).all())
    assert bool((k3_kl(a, a) == 0).all())
    close(k3_kl(t([0.0]), t([LN2])), [K3_LN2])


def test_mismatch_and_approx_kl_zero_with_identical_logprobs() -> None:
    lp = t([[-0.3, -1.2, -2.0]])
    _, m = run(LossConfig(), logprobs=lp.clone(), proximal_logprobs=lp, behaviour_logprobs=lp)
    assert float(m["mismatch_kl"]) == 0.0
    assert float(m["approx_kl"]) == 0.0
    close(m["tis_weight_max"], 1.0)
    # mismatch over unmasked tokens only: proximal - behaviour = ln 2 on the one unmasked token
    _, m = run(
        LossConfig(),
        logprobs=lp,
        proximal_logprobs=lp,
        behaviour_logprobs=lp - t([[LN2, 5.0, 5.0]]),
        loss_mask=t([[1, 0, 0]]),
    )
    close(m["mismatch_kl"], K3_LN2)


def test_kl_loss_to_reference() -> None:
    cur = t([[-1.0, -2.0]])
    kw = dict(logprobs=cur, behaviour_logprobs=cur, ref_logprobs=cur + LN2)
    kw["advantages"] = torch.zeros(1, 2)
    loss, m = run(LossConfig(kl_coef=1e-3), **kw)
    close(loss, 1e-3 * K3_LN2)
    close(m["kl_ref"], K3_LN2)
    with pytest.raises(ValueError, match="ref_logprobs"):
        run(LossConfig(kl_coef=1e-3), logprobs=cur, behaviour_logprobs=cur)
    off, m = run(LossConfig(), **kw)  # default coefficient 0: logged, not in the loss
    close(off, 0.0)
    close(m["kl_ref"], K3_LN2)


def test_entropy_bonus() -> None:
    cur = t([[-1.0, -2.0, -3.0]])
    ent = t([[1.0, 3.0, 100.0]])
    kw = dict(logprobs=cur, behaviour_logprobs=cur, entropy=ent)
    kw["advantages"], kw["loss_mask"] = torch.zeros(1, 3), t([[1, 1, 0]])
    loss, m = run(LossConfig(entropy_coef=0.01), **kw)
    close(loss, -0.01 * 2.0)
    close(m["entropy"], 2.0)
    close(run(LossConfig(), **kw)[0], 0.0)


PER_TOKEN = t([[1, 2, 3, 4], [5, 6, 0, 0], [7, 7, 7, 7]])
MASK = t([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])  # the third row has no generated token


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", (1 + 2 + 3 + 5) / 4),  # 2.75
        ("seq-mean-token-sum", (6 + 5) / 2),  # 5.5
        ("seq-mean-token-mean", (6 / 3 + 5 / 1) / 2),  # 3.5
        ("seq-mean-token-sum-norm", (6 / 4 + 5 / 4) / 2),  # 1.375 with constant 4
    ],
)
def test_aggregation_modes(mode: Aggregation, expected: float) -> None:
    close(aggregate(PER_TOKEN, MASK, mode, norm_constant=4.0), expected)


def test_aggregation_global_denominators_sum_over_micro_batches() -> None:
    close(aggregate(PER_TOKEN, MASK, "token-mean", global_tokens=8), 11 / 8)
    close(aggregate(PER_TOKEN, MASK, "seq-mean-token-sum", global_seqs=4), 11 / 4)
    modes: tuple[Aggregation, ...] = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")
    for mode in modes:
        full = aggregate(PER_TOKEN, MASK, mode)
        parts = [
            aggregate(PER_TOKEN[i : i + 1], MASK[i : i + 1], mode, global_tokens=4, global_seqs=2)
            for i in range(3)
        ]
        close(torch.stack(parts).sum(), float(full))


def test_policy_loss_uses_config_aggregation() -> None:
    cur = torch.zeros(2, 3)
    adv = t([[1, 1, 1], [1, 0, 0]])
    mask = t([[1, 1, 1], [1, 0, 0]])
    kw = dict(logprobs=cur, behaviour_logprobs=cur, advantages=adv, loss_mask=mask)
    close(run(LossConfig(aggregation="seq-mean-token-sum"), **kw)[0], (-3 - 1) / 2)
    close(run(LossConfig(aggregation="seq-mean-token-mean"), **kw)[0], -1.0)
    cfg = LossConfig(aggregation="seq-mean-token-sum-norm", norm_constant=10.0)
    close(run(cfg, **kw)[0], (-3 / 10 - 1 / 10) / 2)


def test_gradient_equals_minus_advantage_times_ratio_gradient() -> None:
    prox = t([[-1.0, -0.5, -2.0, -0.7]])
    cur = (prox + t([[0.1, -0.1, 0.05, 0.6]])).requires_grad_(True)  # last: ratio 1.82, clipped
    adv = t([[2.0, -1.0, 0.5, 1.0]])
    loss, _ = policy_loss(
        LossConfig(),
        logprobs=cur,
        behaviour_logprobs=prox,
        proximal_logprobs=prox,
        advantages=adv,
        loss_mask=torch.ones(1, 4),
    )
    (grad,) = torch.autograd.grad(loss, cur)
    leaf = cur.detach().requires_grad_(True)
    (ratio_grad,) = torch.autograd.grad(torch.exp(leaf - prox).sum(), leaf)
    expected = -adv * ratio_grad / 4  # token-mean over 4 tokens, weight 1
    expected[0, 3] = 0.0  # the clipped token gets no gradient
    torch.testing.assert_close(grad, expected, atol=1e-6, rtol=0)
    # with a TIS weight of 0.5 on every token the gradient scales by 0.5
    cur2 = cur.detach().requires_grad_(True)
    loss2, _ = policy_loss(
        LossConfig(),
        logprobs=cur2,
        behaviour_logprobs=prox + LN2,
        proximal_logprobs=prox,
        advantages=adv,
        loss_mask=torch.ones(1, 4),
    )
    (grad2,) = torch.autograd.grad(loss2, cur2)
    torch.testing.assert_close(grad2, 0.5 * expected, atol=1e-6, rtol=0)


def test_masked_tokens_contribute_nothing() -> None:
    cur = torch.zeros(1, 3, requires_grad=True)
    loss, _ = policy_loss(
        LossConfig(),
        logprobs=cur,
        behaviour_logprobs=torch.zeros(1, 3),
        advantages=t([[1.0, 1e6, 1.0]]),
        loss_mask=t([[1, 0, 1]]),
    )
    close(loss, -1.0)
    (grad,) = torch.autograd.grad(loss, cur)
    assert float(grad[0, 1]) == 0.0
    # garbage (inf / nan) on masked positions, e.g. padding, does not leak into loss or metrics
    bad = t([[-1.0, float("nan"), -1.0]])
    loss, m = policy_loss(
        LossConfig(),
        logprobs=torch.zeros(1, 3),
        behaviour_logprobs=bad,
        advantages=t([[1.0, float("inf"), 1.0]]),
        loss_mask=t([[1, 0, 1]]),
    )
    assert all(bool(torch.isfinite(v)) for v in [loss, *m.values()])


def test_config_validation_and_frozen() -> None:
    with pytest.raises(ValueError, match="norm_constant"):
        LossConfig(aggregation="seq-mean-token-sum-norm")
    with pytest.raises(ValueError, match="correction"):
        LossConfig(correction="icepop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="aggregation"):
        LossConfig(aggregation="sum")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="clip_eps_low"):
        LossConfig(clip_eps_low=1.5)
    with pytest.raises(ValidationError, match="frozen"):
        LossConfig().kl_coef = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="shape"):
        policy_loss(
            LossConfig(),
            logprobs=torch.zeros(1, 3),
            behaviour_logprobs=torch.zeros(1, 2),
            advantages=torch.zeros(1, 3),
            loss_mask=torch.ones(1, 3),
        )
