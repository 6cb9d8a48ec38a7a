"""The report's words: report.md's one page (the machine, the best row per case, each case's trials) and, per case,
why its pick won: its figures, what failed above it, how the other profiles stand against it on the objective.
Pure: rows in, Markdown out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ladder.ui.report.charts import (
    DEFAULT_OBJECTIVE,
    FIGURES,
    Row,
    case_labels,
    is_host,
    measured,
    num,
    peak_mem,
    rung_label,
    trial_plot_name,
)

PER_JOULE = "samples_per_joule"
NAMES = FIGURES | {PER_JOULE: "samples per joule"}  # the objectives by name
INTERVALS = ("samples_per_s", PER_JOULE)  # figures compared by their 95% intervals (`_lo`, `_hi`), not by points
BEST_TABLE = {
    "case": "case",
    "variant": "variant",
    "rung": "rung",
    "status": "status",
    "min avg util %": "min_avg_util",
    "peak mem MiB": "peak_mem",
    "samples/s": "samples_per_s",
    "class": "class",
    "action": "action",
}
TRIAL_TABLE = {
    "#": "number",
    "variant": "variant",
    "rung": "rung",
    "status": "status",
    "reason": "reason",
    "util %": "min_avg_util",
    "peak mem MiB": "peak_mem",
    "samples/s": "samples_per_s",
    "window from s": "window_start_s",
    "why this rung": "why",
    "plot": "plot",
}


def summary_md(sweep: str, best: Sequence[Row], trials: Sequence[Row]) -> str:
    """The one-page report: the machine, the best row per case, then each case's chart and its trials."""
    lines = [f"# Sweep `{sweep}`", "", _machine_line(best, trials), "", _legend(trials), "", "## Best per case", ""]
    lines += md_table(best, with_energy(BEST_TABLE, best))
    for case in sorted({r.get("case", "") for r in trials}):
        lines += ["", f"## {case}", "", "**Why this pick.** " + why_pick(case, best, trials), ""]
        lines += placement_lines(case, best)
        lines += [f"![{case}](plots/{case}.png)", ""]
        mine = [r for r in trials if r.get("case") == case]
        lines += md_table(mine, with_energy(TRIAL_TABLE, mine))
    return "\n".join(lines) + "\n"


def with_energy(columns: dict[str, str], rows: Sequence[Row]) -> dict[str, str]:
    """A table's columns with samples per joule after samples/s where a row measured it (a GPU's window); as they
    were elsewhere (on CPU no trial has an energy figure)."""
    if not any(r.get(PER_JOULE) for r in rows):
        return columns
    at = list(columns).index("samples/s") + 1
    items = list(columns.items())
    return dict([*items[:at], ("samples/J", PER_JOULE), *items[at:]])


def _legend(trials: Sequence[Row]) -> str:
    """What the tables' figures are, on this machine's kind, and what a blank means."""
    util, mem = case_labels(is_host(trials))
    rss = (
        " (the whole process's, torch and Python included: it can exceed an emulated card, which caps the data "
        "segment; the plots show the card's own use)"
        if is_host(trials)
        else ""
    )
    return (
        f"util %: {util}; peak mem MiB: {mem}{rss}; window from s: seconds from the launch to the window's opening. "
        "A blank is no measurement: a failed or cut trial has no samples/s, and a probe whose ranks died before "
        "they were seen has no memory figure." + _energy_legend(trials)
    )


def _energy_legend(trials: Sequence[Row]) -> str:
    if not any(r.get(PER_JOULE) for r in trials):
        return ""
    counter = all(r.get("energy_counter") == "1" for r in trials if r.get(PER_JOULE))
    how = "NVML's energy counter" if counter else "NVML's energy counter, or its power readings integrated"
    return f" samples/J: the window's samples over the joules its GPUs used ({how})."


def _machine_line(best: Sequence[Row], trials: Sequence[Row]) -> str:
    first = next(iter(best or trials), {})
    total = first.get("gpu_mem_total")
    emulated = "an emulated card of " if first.get("emulate_gpu_mem_gb") else ""
    memory = f" ({emulated}{total} MiB each)" if total else ""
    cases = len({r.get("case") for r in trials})
    return (
        f"{len(trials)} trial(s), {cases} case(s) on {first.get('host', '?')}: "
        f"{first.get('n_gpus', '?')} x {first.get('gpu_name', '?')}{memory}."
    )


def md_table(rows: Sequence[Row], columns: dict[str, str]) -> list[str]:
    head = "| " + " | ".join(columns) + " |"
    return [
        head,
        "|" + "---|" * len(columns),
        *("| " + " | ".join(_cell(r, k) for k in columns.values()) + " |" for r in rows),
    ]


def why_pick(case: str, best: Sequence[Row], trials: Sequence[Row]) -> str:
    """A short paragraph: the pick and its figures, what happened above it, how the other profiles compare on the
    objective the pick maximised (the best row's `objective`; a file written before that column: the default)."""
    rows = [r for r in trials if r.get("case") == case and r.get("status") != "interrupted"]
    rows = [r for r in rows if r.get("phase") != "placement"]  # one-device jobs: their own line (`placement_lines`)
    pick = next((r for r in best if r.get("case") == case and r.get("status") == "ok"), None)
    if pick is None:
        tried = ", ".join(f"{r.get('variant')} {_name(r)} {_outcome(r)}" for r in rows) or "no trial ran"
        if any(r.get("status") == "ok" for r in rows):
            return f"No pick recorded yet (best_by_case.tsv is written when the sweep ends): {tried}."
        return f"No rung fits: {tried}."
    rung, profile = int(pick["num_envs"]), pick.get("variant", "")
    objective = pick.get("objective") or DEFAULT_OBJECTIVE
    whole = [r for r in rows if measured(r)]
    leads = [
        name
        for key, name in FIGURES.items()
        if (v := num(pick, key)) is not None and all((num(r, key) or 0) <= v for r in whole)
    ]
    text = f"{profile} {_name(pick)}: {_figures(pick)}; picked on {NAMES.get(objective, objective)}"
    text += f", the highest {' and the highest '.join(leads)} measured." if leads else "."
    above = sorted(
        (r for r in rows if r.get("variant") == profile and int(r["num_envs"]) > rung),
        key=lambda r: -int(r["num_envs"]),
    )
    if above:
        text += " Above it: " + ", ".join(f"{_name(r)} {_outcome(r)}" for r in above) + "."
    for other in sorted({r.get("variant", "") for r in whole} - {profile}):
        top = max((r for r in whole if r.get("variant") == other), key=lambda r: num(r, objective) or 0)
        text += f" {other}'s best, {_name(top)}: {_figures(top)}; {versus(top, pick, objective)}."
    cut = [f"{r.get('variant')} {_name(r)}" for r in rows if r.get("status") == "ok" and num(r, "cut")]
    if cut:
        text += f" Cut short once they could not beat the best so far: {', '.join(cut)}."
    if tie := pick.get("tie"):  # why a pick that is not the top figure won: the others were within the noise
        text += f" {tie[0].upper()}{tie[1:]}."
    return text + _unstable_words(pick)


def placement_lines(case: str, best: Sequence[Row]) -> list[str]:
    """The case's measured placement (`placement=measure`): the winner and its figures, one line; none where not
    measured."""
    row = next((r for r in best if r.get("case") == case and r.get("placement")), None)
    if row is None:
        return []
    return [f"**Placement.** {row['placement']}: {row.get('placement_note', '')}.", ""]


def _unstable_words(pick: Row) -> str:
    """What a pick marked `unstable` (its samples/s interval wider than measure.max_ci_frac) leaves open."""
    if pick.get("unstable") != "1":
        return ""
    sps, lo, hi = num(pick, "samples_per_s"), num(pick, "samples_per_s_lo"), num(pick, "samples_per_s_hi")
    width = ""
    if sps and lo is not None and hi is not None and math.isfinite(hi):  # too few points: 0 to inf, no width
        width = f" (95% interval {lo:.0f}-{hi:.0f}, {(hi - lo) / sps:.0%} of it)"
    return (
        f" Its samples/s is unstable{width}: wider than measure.max_ci_frac, so the comparisons above rest on a "
        "rough figure; measure it again (measure.recheck_unstable=true) or over a longer measure.window_s before "
        "relying on it."
    )


def _name(row: Row) -> str:
    return rung_label(row.get("knob") or "num_envs", int(row.get("num_envs") or 0))


def _outcome(row: Row) -> str:
    if row.get("status") == "ok":
        return "cut short" if num(row, "cut") else f"measured {_figures(row)}"
    if row.get("status") == "diverged":
        return "fits, but its training went NaN or inf (diverged)"
    return f"failed ({row.get('reason') or row.get('status')})"


def _figures(row: Row) -> str:
    sps, lo, hi = num(row, "samples_per_s"), num(row, "samples_per_s_lo"), num(row, "samples_per_s_hi")
    util = num(row, "min_avg_util")
    interval = f" (95% interval {lo:.0f}-{hi:.0f})" if lo is not None and hi is not None else " (no interval)"
    parts = [f"{sps:.0f} samples/s{interval}"] if sps is not None else []
    parts += [f"min avg util {util:g}%"] if util is not None else []
    return ", ".join(parts) or "no figures"


def versus(row: Row, pick: Row, objective: str) -> str:
    """How `row` stands against the pick on the objective: samples/s by their 95% intervals (above or below only
    where the intervals do not meet), util by its figure; then the other figure, named as not the objective."""
    words = [_against(row, pick, objective) + f" on the objective ({NAMES.get(objective, objective)})"]
    words += [f"{_against(row, pick, key)} on {name}" for key, name in FIGURES.items() if key != objective]
    return "; ".join(w for w in words if not w.startswith("unknown"))


def _against(row: Row, pick: Row, key: str) -> str:
    value, theirs = num(row, key), num(pick, key)
    if value is None or theirs is None:
        return "unknown"
    if key not in INTERVALS:
        return (
            "level with the pick"
            if value == theirs
            else f"{abs(value - theirs):.1f} points " + ("above the pick" if value > theirs else "below the pick")
        )
    lo, hi, pick_lo, pick_hi = (num(r, k) for r in (row, pick) for k in (f"{key}_lo", f"{key}_hi"))
    if None in (lo, hi, pick_lo, pick_hi) or math.isinf(hi or 0) or math.isinf(pick_hi or 0):
        return "of unknown noise against the pick (no interval on one side or both)"
    assert lo is not None and hi is not None and pick_lo is not None and pick_hi is not None
    if hi < pick_lo:
        return "below the pick's interval"
    if lo > pick_hi:
        return "above the pick's interval"
    return "within the noise of the pick (the intervals overlap)"


def _cell(row: Row, key: str) -> str:
    if key == "rung":
        return _name(row) if row.get("num_envs") else ""
    if key == "peak_mem":
        mem = peak_mem(row)
        return "" if mem is None else f"{mem:.0f}"
    if key == "plot":
        return f"[png](plots/{trial_plot_name(row)})"
    return str(row.get(key) or "").replace("|", "/")
