"""Charts to PNG files with matplotlib (Agg: no display needed). Only drawing here; the data comes built."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from ladder.report.charts import PROC_SUFFIX, CaseChart, Series, TrialChart

DPI = 110
CARD_STYLE = {"color": "tab:red", "linestyle": "--", "linewidth": 1.2}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colors(series: tuple[Series, ...]) -> dict[str, str]:
    """One colour per profile, shared by its line and its failure crosses."""
    names = sorted({s.label.split(" failed:")[0] for s in series})
    return {name: f"C{i}" for i, name in enumerate(names)}


def _plot_rungs(ax: Any, series: tuple[Series, ...], best: Series | None) -> None:
    colors = _colors(series)
    for s in series:
        profile = s.label.split(" failed:")[0]
        x = [v * _nudge(list(colors).index(profile), len(colors)) for v in s.x]
        if s.failed:
            ax.plot(x, s.y, "x", color=colors[profile], markersize=10, markeredgewidth=2, label=s.label)
        else:
            ax.plot(x, s.y, "o-", color=colors[profile], linewidth=1.8, markersize=7, label=s.label)
    if best is not None:
        ax.plot(best.x, best.y, "*", color="gold", markeredgecolor="black", markersize=18, zorder=5, label=best.label)


def _nudge(i: int, n: int) -> float:
    """Profiles side by side around each rung (a few percent on the log axis), so equal figures stay visible."""
    return float(2 ** (0.06 * (i - (n - 1) / 2)))


def _rung_axis(ax: Any, rungs: tuple[int, ...]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(rungs))
    ax.set_xticklabels([str(r) for r in rungs])
    ax.minorticks_off()
    ax.set_xlabel("num_envs (log scale)")
    ax.grid(True, alpha=0.3)


def draw_case(chart: CaseChart, path: Path) -> None:
    plt = _pyplot()
    fig, (util_ax, mem_ax) = plt.subplots(1, 2, figsize=(13, 5))
    _plot_rungs(util_ax, chart.util, chart.best_util)
    util_ax.set_ylabel(chart.util_label)
    util_ax.set_title("util over the measured window (failed rungs: until they failed)", fontsize=10)
    _plot_rungs(mem_ax, chart.mem, chart.best_mem)
    if chart.card_mem_mb is not None:
        mem_ax.axhline(chart.card_mem_mb, label=chart.card_label, **CARD_STYLE)
    mem_ax.set_ylabel(chart.mem_label)
    mem_ax.set_title(chart.mem_title, fontsize=10)
    for ax in (util_ax, mem_ax):
        _rung_axis(ax, chart.rungs)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.15)  # headroom for the legend and the markers at the top
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{chart.case}: util and peak memory per rung and profile", fontsize=13)
    _save(plt, fig, path)


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
        ax.axvline(chart.end_s, color="tab:red", linestyle=":", linewidth=1.5,
                   label="trial ended" if labelled else None)  # fmt: skip


def _save(plt: Any, fig: Any, path: Path, bottom: float | None = None) -> None:
    fig.tight_layout(rect=(0, bottom or 0, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
