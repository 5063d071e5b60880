"""PNG plots of one run, or of several runs overlaid (one line per run, labelled by its folder).

Contract: `write_plots(runs, out_dir)` writes, for the data the runs have, `success_reward.png`
(training success rate and reward vs learner step), `eval_success.png` (held-out success vs
policy version, with chance and the env's rule as labelled lines when measured),
`eval_by_category.png` (one run's held-out success per category, each beside its yardsticks), `turns.png` (turns per episode vs step), `throughput.png` (rollout generated
tokens/s and learner tokens/s vs step) and `staleness.png` (histogram of sent groups' staleness)
and returns the paths written; a plot with no data in any run is skipped. Training curves
(success, reward, turns) are drawn as faint raw points under their smoothed line (`smoothed`). Matplotlib figures are
built without pyplot (no display, no global state).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from agentgym_rl.report.records import RunRecords, number

Series = list[tuple[float, float]]


def _by_step(
    run: RunRecords, value: Callable[[dict[str, Any], dict[str, Any] | None], float | None]
) -> Series:
    """Per learner step, the mean of `value` over every server's records in that step
    (`value` also sees the server's previous record, for rates between records)."""
    acc: dict[int, list[float]] = defaultdict(list)
    for records in run.rollout.values():
        prev: dict[str, Any] | None = None
        for r in records:
            v = value(r, prev)
            prev = r
            if v is not None:
                acc[run.step_at(r)].append(v)
    return [(float(s), sum(vs) / len(vs)) for s, vs in sorted(acc.items())]


def _field(
    key: str, env: str | None = None
) -> Callable[[dict[str, Any], dict[str, Any] | None], float | None]:
    """A record's `key`, or `env`'s in its `by_env` (a mixed run's)."""
    if env is None:
        return lambda r, _prev: number(r, key)
    return lambda r, _prev: number(r.get("by_env", {}).get(env) or {}, key)


def _rollout_envs(run: RunRecords) -> list[str]:
    """The envs a mixed run's rollout records break their figures down by."""
    return sorted(
        {e for records in run.rollout.values() for r in records for e in r.get("by_env") or {}}
    )


def _interval_turns(r: dict[str, Any], prev: dict[str, Any] | None) -> float | None:
    """Mean turns of the episodes finished since the previous record (turns_mean is
    cumulative over the server's life)."""
    eps, mean = number(r, "episodes"), number(r, "turns_mean")
    if eps is None or mean is None:
        return None
    p_eps = (number(prev, "episodes") or 0.0) if prev else 0.0
    p_mean = (number(prev, "turns_mean") or 0.0) if prev else 0.0
    if eps < p_eps:  # the server restarted: its counters start from zero
        p_eps, p_mean = 0.0, 0.0
    if eps == p_eps:
        return None
    return (mean * eps - p_mean * p_eps) / (eps - p_eps)


def _learn(run: RunRecords, key: str) -> Series:
    return [
        (float(r["step"]), float(r[key]))
        for r in run.learn
        if number(r, "step") is not None and number(r, key) is not None
    ]


SMOOTHING = 0.8
"""Weight of the running mean in a training curve's smoothed line (TensorBoard's default 0.6
follows per-step noise of a few groups too closely)."""


def smoothed(ys: Sequence[float], weight: float = SMOOTHING) -> list[float]:
    """The debiased exponential moving average of `ys` (the first points are not pulled
    toward 0)."""
    out, mean, norm = [], 0.0, 0.0
    for y in ys:
        mean = weight * mean + (1 - weight) * y
        norm = weight * norm + (1 - weight)
        out.append(mean / norm)
    return out


def _lines(
    ax: Axes,
    runs: list[RunRecords],
    series: Callable[[RunRecords], Series],
    *,
    smooth: bool = False,
    **kw: Any,
) -> int:
    """One line per run; with `smooth`, the raw points faint and their smoothed line over
    them in the same colour (training curves are per-step noise)."""
    drawn = 0
    for run in runs:
        points = series(run)
        if points:
            xs, ys = zip(*points, strict=True)
            label = f"{run.name} {kw.get('label', '')}".strip()
            style = kw.get("linestyle", "-")
            if smooth and len(xs) > 2:
                [raw] = ax.plot(xs, ys, linestyle=style, alpha=0.3, linewidth=0.8)
                ax.plot(xs, smoothed(ys), color=raw.get_color(), linestyle=style, label=label)
            else:
                ax.plot(xs, ys, marker="." if len(xs) < 30 else None, label=label, linestyle=style)
            drawn += 1
    return drawn


def _save(fig: Figure, path: Path, drawn: int) -> Path | None:
    if not drawn:
        return None
    for ax in fig.axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps, versions, staleness
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def plot_success_reward(runs: list[RunRecords], out: Path) -> Path | None:
    fig = Figure(figsize=(10, 4))
    a, b = fig.subplots(1, 2)
    envs: list[str | None] = [*_rollout_envs(runs[0])] if len(runs) == 1 else []
    drawn = 0
    for env in envs or [None]:
        series = partial(_by_step, value=_field("success_rate", env))
        drawn += _lines(a, runs, series, smooth=True, label=env or "")
    a.set(xlabel="learner step", ylabel="success rate (training episodes)", ylim=(-0.02, 1.02))
    drawn += _lines(b, runs, lambda r: _learn(r, "reward_mean"), label="learner batch", smooth=True)
    drawn += _lines(
        b,
        runs,
        lambda r: _by_step(r, _field("reward_mean")),
        label="rollout",
        linestyle="--",
        smooth=True,
    )
    b.set(xlabel="learner step", ylabel="mean reward")
    return _save(fig, out / "success_reward.png", drawn)


def _eval_series(run: RunRecords, env: str | None = None) -> Series:
    return [(float(v), s) for v, s in run.eval_by_version(env)]


def plot_eval(runs: list[RunRecords], out: Path) -> Path | None:
    """Held-out success by version: one line per run, or per env of a mixed run."""
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    envs: list[str | None] = list(runs[0].eval_envs()) if len(runs) == 1 else []
    if envs:
        drawn = sum(_lines(ax, runs, partial(_eval_series, env=env), label=env) for env in envs)
    else:
        drawn = _lines(ax, runs, _eval_series)
    if len(runs) == 1:
        for env in envs or [None]:
            yardstick_lines(ax, runs[0], env, label=f"{env} " if env else "")
    ax.set(xlabel="policy version", ylabel="held-out success", ylim=(-0.02, 1.02))
    return _save(fig, out / "eval_success.png", drawn)


def yardstick_lines(
    ax: Axes, run: RunRecords, env: str | None, category: str = "all", **kw: Any
) -> None:
    """Chance (dashed) and the env's rule (dotted) as horizontal lines; each labelled with
    `label` before its name ("babyai " for a mixed run's env), none when `label` is None."""
    label = kw.pop("label", "")
    kw.setdefault("color", "grey")
    chance, rule = run.yardstick(env, category)
    for value, name, style in ((chance, "chance", "--"), (rule, "rule", ":")):
        if value is not None:
            text = None if label is None else f"{label}{name} {value:.2f}"
            ax.axhline(value, linestyle=style, linewidth=1, label=text, **kw)


def plot_eval_categories(runs: list[RunRecords], out: Path) -> Path | None:
    """One run's held-out success by version per category of each env (a panel per env), each
    with its chance (dashed) and rule (dotted) in the same colour."""
    if len(runs) != 1:
        return None
    run = runs[0]
    envs: list[str | None] = list(run.eval_envs()) or [None]
    fig = Figure(figsize=(6.5 * len(envs), 4.5))
    axes = fig.subplots(1, len(envs), squeeze=False)[0]
    drawn = 0
    for ax, env in zip(axes, envs, strict=True):
        for category, points in run.eval_by_category(env).items():
            xs, ys = zip(*points, strict=True)
            [line] = ax.plot(xs, ys, marker=".", label=category)
            yardstick_lines(ax, run, env, category, label=None, color=line.get_color(), alpha=0.8)
            drawn += 1
        ax.set(
            xlabel="policy version",
            ylabel="held-out success",
            ylim=(-0.02, 1.02),
            title=f"{env or 'held-out'} by category (dashed: chance, dotted: rule)",
        )
    return _save(fig, out / "eval_by_category.png", drawn)


def plot_turns(runs: list[RunRecords], out: Path) -> Path | None:
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    drawn = _lines(ax, runs, lambda r: _by_step(r, _interval_turns), smooth=True)
    ax.set(xlabel="learner step", ylabel="turns per episode")
    return _save(fig, out / "turns.png", drawn)


def plot_throughput(runs: list[RunRecords], out: Path) -> Path | None:
    fig = Figure(figsize=(10, 4))
    a, b = fig.subplots(1, 2)

    # every server's rate, averaged per step, times the number of servers: the run's total
    def generated(run: RunRecords) -> Series:
        n = max(len(run.rollout), 1)
        return [(s, v * n) for s, v in _by_step(run, _field("generated_tokens_per_s"))]

    drawn = _lines(a, runs, generated)
    a.set(xlabel="learner step", ylabel="rollout generated tokens/s (all servers)")
    drawn += _lines(b, runs, lambda r: _learn(r, "tokens_per_s"))
    b.set(xlabel="learner step", ylabel="learner tokens/s")
    return _save(fig, out / "throughput.png", drawn)


def staleness_histogram(run: RunRecords) -> dict[int, int]:
    """Sent groups by staleness, from each server's last record (the counts are cumulative)."""
    hist: dict[int, int] = defaultdict(int)
    for records in run.rollout.values():
        last = next((r for r in reversed(records) if isinstance(r.get("staleness"), dict)), None)
        for k, v in (last or {}).get("staleness", {}).items():
            hist[int(k)] += int(v)
    return dict(sorted(hist.items()))


def plot_staleness(runs: list[RunRecords], out: Path) -> Path | None:
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    width = 0.8 / max(len(runs), 1)
    drawn = 0
    for i, run in enumerate(runs):
        hist = staleness_histogram(run)
        if hist:
            xs = [k + (i - (len(runs) - 1) / 2) * width for k in hist]
            ax.bar(xs, list(hist.values()), width=width, label=run.name)
            drawn += 1
    ax.set(xlabel="staleness (learner version - oldest token version)", ylabel="groups sent")
    return _save(fig, out / "staleness.png", drawn)


def write_plots(runs: list[RunRecords], out_dir: Path) -> list[Path]:
    """Every plot the runs have data for, into `out_dir`; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    makers = (
        plot_success_reward,
        plot_eval,
        plot_eval_categories,
        plot_turns,
        plot_throughput,
        plot_staleness,
    )
    return [p for p in (make(runs, out_dir) for make in makers) if p is not None]
