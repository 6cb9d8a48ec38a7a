"""The memory model's chart, one PNG per case, profile and cap (`cards_<case>_<profile>.png`): the measured peaks
against the knob, failures at the cap they ran out of, the fitted line with its 95% band, each card's allowed
memory (its size less the headroom) and the rung predicted on it. Only drawing here; the table comes built
(`ladder.sweep.cards.Table`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ladder.core.memory.cards import Answer, Basis
from ladder.core.memory.model import Model
from ladder.core.paths import JOURNAL
from ladder.storage.history import Group
from ladder.sweep import cards
from ladder.sweep.cards import Table

DPI = 110
PLOTS = "plots"  # as the report's other charts


def write_cards(
    sweep_dir: Path, cards_gb: Sequence[float] | None = None, storage: Any = None
) -> tuple[Table, list[Path]]:
    """`cards.tsv` in `sweep_dir` (an older sweep's too) and its charts under plots/, for `python -m ladder.report`;
    the table (its `lines` for the console) and the charts' paths. `cards_gb`: None for the cards the sweep
    recorded. `storage`: the sweep's, where it is not the journal in its folder; a folder with neither gets
    nothing."""
    if storage is None and not (sweep_dir / JOURNAL).is_file():
        return Table({}, {}, {}, [], []), []
    table = cards.for_sweep(sweep_dir, cards_gb, storage)
    return table, draw_cards(table, sweep_dir / PLOTS)


MD_COLUMNS = {
    "case": "case",
    "profile": "profile",
    "cap": "cap",
    "card_gb": "card GB",
    "num_envs": "largest fit",
    "basis": "basis",
}


def cards_md(table: Table, plots: Sequence[Path]) -> list[str]:
    """report.md's section: each card's largest fit (cards.tsv's rows), and the memory charts linked."""
    if not table.rows:
        return []
    lead = "Each card's largest fit, its memory headroom (mem_headroom_frac) left free, and what it stands on"
    lines = ["## Every card", "", f"{lead} ({cards.CARDS_TSV}).", ""]
    lines += ["| " + " | ".join([*MD_COLUMNS.values(), "peak MiB (95%)", "reason"]) + " |"]
    lines += ["|" + "---|" * (len(MD_COLUMNS) + 2)]
    for row in table.rows:
        peak = f"{row['peak_mb']} ({row['peak_lo_mb']}-{row['peak_hi_mb']})" if row.get("peak_mb") else ""
        cells = [row.get(k, "") for k in MD_COLUMNS] + [peak, row.get("reason", "")]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    lines.append("")
    lines += [f"![{p.stem}]({PLOTS}/{p.name})" for p in plots]
    return lines


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_name(group: Group) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{group.case}_{group.profile}")
    suffix = "" if group.cap == "emulated card" else "_" + re.sub(r"\W+", "_", group.cap)
    return f"cards_{safe}{suffix}.png"


def draw_cards(table: Table, folder: Path) -> list[Path]:
    """One chart per group of the table, in `folder`; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for group, model in table.models.items():
        rungs, headroom = table.ladders[group]
        path = folder / plot_name(group)
        _draw(group, model, rungs, headroom, table.answers[group], path)
        paths.append(path)
    return paths


def _draw(group: Group, model: Model, rungs: list[int], headroom: float, found: list[Answer], path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 6))
    _points(ax, model)
    if model.lines:
        _band(ax, model, rungs)
    for i, a in enumerate(found):
        _card(ax, a, headroom, f"C{(i + 2) % 10}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(rungs)
    ax.set_xticklabels([str(r) for r in rungs])
    ax.minorticks_off()
    ax.set_xlabel("num_envs (log scale)")
    ax.set_ylabel(f"peak memory, MiB ({group.cap})")
    ax.grid(True, alpha=0.3)
    why = f"unreliable: {model.unreliable}" if model.unreliable else "fit per device with its 95% prediction band"
    ax.set_title(f"{group.case} {group.profile}: memory against num_envs ({why})", fontsize=10, wrap=True)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _points(ax: Any, model: Model) -> None:
    fits = [o for o in model.observations if o.fits]
    for device in range(max((len(o.peaks_mb) for o in fits), default=0)):
        xs = [o.knob for o in fits if device < len(o.peaks_mb)]
        ax.plot(
            xs, [o.peaks_mb[device] for o in fits if device < len(o.peaks_mb)], "o", label=f"measured, device {device}"
        )
    if model.bounds:  # a failure: its rung needs more than this
        ax.plot(
            [b.knob for b in model.bounds], [b.cap_mb for b in model.bounds], "^", color="black", label="ran out above"
        )


def _band(ax: Any, model: Model, rungs: list[int]) -> None:
    xs = sorted({*rungs, *(o.knob for o in model.observations)})
    for line in model.lines:
        mid = [line.predict(x) for x in xs]
        half = [line.half_width(x) for x in xs]
        ax.plot(xs, mid, "-", linewidth=1.2, label=f"fit, device {line.device}")
        ax.fill_between(
            xs,
            [m - h for m, h in zip(mid, half, strict=True)],
            [m + h for m, h in zip(mid, half, strict=True)],
            alpha=0.15,
        )


def _card(ax: Any, a: Answer, headroom: float, color: str) -> None:
    allowed = (1.0 - headroom) * a.card_mb
    ax.axhline(allowed, color=color, linestyle="--", linewidth=1.0, label=f"{a.card_gb:g} GB less {headroom:.0%}")
    if a.rung is not None and a.peak_mb is not None:
        marker = "*" if a.basis is not Basis.UNRELIABLE else "x"
        ax.plot(
            [a.rung], [a.peak_mb], marker, color=color, markersize=14, label=f"{a.card_gb:g} GB: e{a.rung} ({a.basis})"
        )
