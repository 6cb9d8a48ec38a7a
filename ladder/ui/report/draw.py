"""Charts to PNG files with matplotlib (Agg: no display needed). Only drawing here; the data comes built."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ladder.ui.report.bench import Point as BenchPoint
from ladder.ui.report.charts import PROC_SUFFIX, CaseChart, Series, TrialChart

DPI = 110
CARD_STYLE = {"color": "tab:red", "linestyle": "--", "linewidth": 1.2}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _profile(label: str) -> str:
    return label.split(" failed:")[0].split(" cut short")[0]


def _colors(chart: CaseChart) -> dict[str, str]:
    """One colour per profile, shared by its lines, its failure crosses and its marks, on every panel."""
    names = sorted({_profile(s.label) for s in (*chart.util, *chart.mem, *chart.sps, *chart.marks)})
    return {name: f"C{i}" for i, name in enumerate(names)}


def _plot_rungs(ax: Any, series: tuple[Series, ...], best: Series | None, colors: dict[str, str]) -> None:
    for s in series:
        profile = _profile(s.label)
        x = [v * _nudge(list(colors).index(profile), len(colors)) for v in s.x]
        if s.failed:
            ax.plot(x, s.y, "x", color=colors[profile], markersize=10, markeredgewidth=2, label=s.label)
        elif s.lo:
            err = ([y - lo for y, lo in zip(s.y, s.lo, strict=True)], [hi - y for y, hi in zip(s.y, s.hi, strict=True)])
            ax.errorbar(
                x,
                s.y,
                yerr=err,
                fmt="o-",
                color=colors[profile],
                linewidth=1.8,
                markersize=7,
                capsize=4,
                label=s.label + ("" if len(s.no_interval) == len(s.x) else " (95% interval)"),
            )
            if s.no_interval:  # hollow: no interval could be measured (too few points in the window)
                blank = [(xi, y) for xi, v, y in zip(x, s.x, s.y, strict=True) if v in s.no_interval]
                ax.plot(
                    *zip(*blank, strict=True),
                    "o",
                    color=colors[profile],
                    markerfacecolor="white",
                    markersize=7,
                    markeredgewidth=2,
                    zorder=4,
                    label=f"{s.label}: no interval (too few points)",
                )
        else:
            ax.plot(x, s.y, "o-", color=colors[profile], linewidth=1.8, markersize=7, label=s.label)
    if best is not None:  # a ring around the pick, centred on its (nudged) point, which stays visible
        pick = best.label.removeprefix("best: ").rsplit(" ", 1)[0]
        nudge = _nudge(list(colors).index(pick), len(colors)) if pick in colors else 1.0
        ax.plot(
            [v * nudge for v in best.x],
            best.y,
            "o",
            markerfacecolor="none",
            markeredgecolor="goldenrod",
            markeredgewidth=2.5,
            markersize=20,
            zorder=5,
            label=best.label,
        )


def _plot_marks(ax: Any, marks: tuple[Series, ...], colors: dict[str, str]) -> None:
    """Failed and cut-short trials at their rung, at the foot of the panel: they have no figure to plot."""
    feet = ax.get_xaxis_transform()  # x in data, y in axes fractions
    for s in marks:
        profile = _profile(s.label)
        x = [v * _nudge(list(colors).index(profile), len(colors)) for v in s.x]
        cut = "cut short" in s.label
        face = "none" if cut else colors[profile]
        ax.plot(
            x,
            [0.04] * len(x),
            "v" if cut else "x",
            transform=feet,
            color=colors[profile],
            markersize=9,
            markeredgewidth=2,
            markerfacecolor=face,
            label=s.label,
            clip_on=False,
        )


def _nudge(i: int, n: int) -> float:
    """Profiles side by side around each rung (a few percent on the log axis), so equal figures stay visible."""
    return float(2 ** (0.06 * (i - (n - 1) / 2)))


def _rung_axis(ax: Any, rungs: tuple[int, ...], knob: str = "num_envs") -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(rungs))
    if rungs:  # room beside the end rungs: the pick's ring and the profiles' side-by-side points stay inside
        ax.set_xlim(min(rungs) / 2**0.35, max(rungs) * 2**0.35)
    ax.set_xticklabels([str(r) for r in rungs])
    ax.minorticks_off()
    ax.set_xlabel(f"{knob} (log scale)")
    ax.grid(True, alpha=0.3)


def draw_case(chart: CaseChart, path: Path) -> None:
    plt = _pyplot()
    fig, (util_ax, sps_ax, mem_ax) = plt.subplots(1, 3, figsize=(19, 5.5))
    colors = _colors(chart)
    _plot_rungs(util_ax, chart.util, chart.best_util, colors)
    _plot_marks(util_ax, chart.marks, colors)
    util_ax.set_ylabel(chart.util_label)
    util_ax.set_title("util over the measured window (x: failed, v: cut short, at their rung)", fontsize=10)
    _plot_rungs(sps_ax, chart.sps, chart.best_sps, colors)
    _plot_marks(sps_ax, chart.marks, colors)
    sps_ax.set_ylabel("samples/s over the measured window")
    sps_ax.set_title("samples/s with its 95% interval (x: failed, v: cut short)", fontsize=10)
    if not chart.sps:
        sps_ax.text(0.5, 0.5, "no samples/s measured", transform=sps_ax.transAxes, ha="center", color="gray")
    _plot_rungs(mem_ax, chart.mem, chart.best_mem, colors)
    if chart.card_mem_mb is not None:
        mem_ax.axhline(chart.card_mem_mb, label=chart.card_label, **CARD_STYLE)
    mem_ax.set_ylabel(chart.mem_label)
    mem_ax.set_title(chart.mem_title, fontsize=10)
    for ax in (util_ax, sps_ax, mem_ax):
        _rung_axis(ax, chart.rungs, chart.knob)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.1)  # the pick's ring stays inside the panel
        if ax.get_legend_handles_labels()[0]:  # below the panel: a legend inside may cover a point
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    fig.suptitle(f"{chart.case}: util, samples/s and peak memory per rung and profile", fontsize=13)
    _save(plt, fig, path, tight=True)


def draw_trial(chart: TrialChart, path: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(11, 8.5), sharex=True, gridspec_kw={"height_ratios": [3, 3, 2]})
    util_ax, mem_ax, step_ax = axes
    for s in chart.util:
        util_ax.plot(s.x, s.y, linewidth=1, label=s.label)
    for s in chart.mem:
        own = s.label.endswith(PROC_SUFFIX)  # the trial's own share of a GPU's memory, drawn dashed
        mem_ax.plot(s.x, s.y, linewidth=1.2, linestyle="--" if own else "-", label=s.label)
    if chart.card_mem_mb is not None:
        mem_ax.axhline(chart.card_mem_mb, label=f"card: {chart.card_mem_mb:.0f} MiB", **CARD_STYLE)
    if chart.cap is not None:
        mem_ax.axhline(chart.cap[0], label=chart.cap[1], **CARD_STYLE)
    step_ax.plot(chart.step.x, chart.step.y, "o-", color="tab:gray", markersize=3, label="step time per iteration")
    if not chart.step.x:
        step_ax.text(0.5, 0.5, "no iteration reported", transform=step_ax.transAxes, ha="center", color="gray")
    util_ax.set_ylabel(chart.util_label)
    mem_ax.set_ylabel(chart.mem_label)
    step_ax.set_ylabel("step time (s)")
    step_ax.set_xlabel("time since launch (s)")
    for ax in axes:
        _phases(ax, chart, labelled=ax is util_ax)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.1)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    step_ax.set_xlim(left=0)
    fig.suptitle(chart.title, fontsize=12)
    if chart.caption:
        fig.text(0.01, 0.01, _caption(chart.caption), fontsize=8, family="monospace", va="bottom")
    _save(plt, fig, path, bottom=0.05 if chart.caption else None)


def _caption(text: str) -> str:
    return "\n".join(textwrap.wrap(textwrap.shorten(text, 300), 150)[:2])


def _phases(ax: Any, chart: TrialChart, labelled: bool) -> None:
    """The warm-up and the window shaded on every panel, named in the legend of the first."""
    if chart.warmup is not None:
        ax.axvspan(*chart.warmup, color="tab:orange", alpha=0.12, label="warm-up" if labelled else None)
    if chart.window is not None:
        ax.axvspan(*chart.window, color="tab:green", alpha=0.18, label="measured window" if labelled else None)
    if chart.end_s is not None:
        ax.axvline(
            chart.end_s, color="tab:red", linestyle=":", linewidth=1.5, label="trial ended" if labelled else None
        )


def _save(plt: Any, fig: Any, path: Path, bottom: float | None = None, tight: bool = False) -> None:
    """`tight`: the saved picture grows to hold what lies outside the panels (legends below them)."""
    fig.tight_layout(rect=(0, bottom or 0, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight" if tight else None)
    plt.close(fig)


def draw_bench(points: Sequence[BenchPoint], low_mem_frac: float, vram_frac: float, path: Path) -> None:
    """Each case's pick: util against peak memory as a share of its card, coloured by class, the decision table's
    memory lines drawn across."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    classes = sorted({p.cls for p in points})
    for i, cls in enumerate(classes):
        mine = [p for p in points if p.cls == cls]
        ax.scatter([p.mem_frac for p in mine], [p.util for p in mine], color=f"C{i}", label=cls, s=36)
        for p in mine:
            ax.annotate(p.case, (p.mem_frac, p.util), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for frac in (low_mem_frac, vram_frac):
        ax.axvline(frac, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("peak memory / card")
    ax.set_ylabel("min_avg_util (%)")
    ax.set_xlim(0, 1.05)
    ax.set_title("the bench: each case's pick")
    ax.legend(fontsize=8, loc="best")
    _save(plt, fig, path)
