"""The bench summary: what the manual routine wrote by hand after benching every case, made from a sweep's rows.

Cases grouped by class with their configuration, `min_avg_util` and `max_mem0/max_mem1`; per-method averages; the
quick decision table with the rows that fire and the cases behind each; the measured placements (one job per device
against one job over all, where `placement=measure` ran); failures with their reasons; the bench's
launches and time against the grid's launches. Pure: rows in, Markdown and chart points out.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ladder.core import figkeys
from ladder.core.caseclass import CaseClass

Row = Mapping[str, str]

CLASS_ORDER = (
    CaseClass.VRAM_BOUND,
    CaseClass.COMPUTE_HEAVY,
    CaseClass.BALANCED,
    CaseClass.THROUGHPUT,
    CaseClass.UNSTABLE,
    CaseClass.BROKEN,
    CaseClass.UNCLASSIFIED,
)
# The routine's quick decision table: its symptom, read from the class a case's pick got, and its first action
DECISION_TABLE = (
    (CaseClass.VRAM_BOUND, "memory near the card (≥ decide.vram_frac) and util 45-55%", "keep the stable rung"),
    (
        CaseClass.THROUGHPUT,
        "memory low (< decide.low_mem_frac of the card) and util < decide.low_util",
        "for the machine's throughput: two one-GPU jobs side by side",
    ),
    (CaseClass.COMPUTE_HEAVY, "util ≥ decide.compute_util, memory moderate", "keep it running"),
    (CaseClass.BALANCED, "in between", "try the hiutil profile"),
    (CaseClass.UNSTABLE, "frequent OOM/NCCL: no stable rung", "step the knob down before tuning anything else"),
    (CaseClass.BROKEN, "an error at every rung", "fix the configuration"),
)


@dataclass(frozen=True)
class Point:
    """One case's pick on the bench chart: util against peak memory as a share of its card."""

    case: str
    util: float
    mem_frac: float
    cls: str


def is_bench(best: Sequence[Row]) -> bool:
    """A sweep is a bench when it holds more than one case."""
    return len({r.get("case", "") for r in best}) > 1


def summary_md(sweep: str, best: Sequence[Row], trials: Sequence[Row], grid_launches: int | None = None) -> str:
    """The bench summary as Markdown (`grid_launches`: every rung of every profile of every case, where known)."""
    lines = [f"# Bench summary: {sweep}", "", *_totals(best, trials, grid_launches), ""]
    lines += _by_class(best) + _per_method(best) + _decisions(best) + _placements(best) + _failures(best, trials)
    return "\n".join(lines) + "\n"


def points(best: Sequence[Row]) -> list[Point]:
    """The chart's points: every measured pick with util and a card to be a share of."""
    out = []
    for row in best:
        util, frac = _num(row, "min_avg_util"), mem_frac(row)
        if util is not None and frac is not None:
            out.append(Point(row.get("case", ""), util, frac, row.get("class", "")))
    return out


def mem_frac(row: Row) -> float | None:
    """Peak memory as a share of the card the class read: the emulated card where one was used, else the GPU."""
    used, cap = _num(row, "cap_used_mb"), _num(row, "cap_mb")
    if used is not None and cap:
        return used / cap
    peak, card = peak_mb(row), _num(row, "gpu_mem_total")
    return peak / card if peak is not None and card and row.get("gpu_name") != "cpu" else None


def peak_mb(row: Row) -> float | None:
    """The row's peak memory, the larger over its devices (the routine's "max_mem, the larger of the two cards")."""
    mems = [float(v) for v in figkeys.values(row, figkeys.MAX_MEM) if v]
    return max(mems) if mems else None


def _totals(best: Sequence[Row], trials: Sequence[Row], grid_launches: int | None) -> list[str]:
    cases = sorted({r.get("case", "") for r in best})
    picked = [r for r in best if r.get("status") == "ok"]
    spent = sum(_num(r, "duration_s") or 0.0 for r in trials)
    grid = f", against {grid_launches} for the grid (every rung of every profile)" if grid_launches else ""
    return [
        f"- cases: {len(cases)}, with a stable pick: {len(picked)}",
        f"- launches: {len(trials)}{grid}; trial time {spent / 60:.1f} min",
    ]


def _by_class(best: Sequence[Row]) -> list[str]:
    out = ["## By class", ""]
    for cls in CLASS_ORDER:
        rows = sorted((r for r in best if r.get("class") == cls), key=lambda r: -(_num(r, "min_avg_util") or 0.0))
        if not rows:
            continue
        out += [f"### {cls} ({len(rows)})", "", "| case | configuration | min_avg_util | max_mem0/max_mem1 |"]
        out += ["|---|---|---:|---:|"]
        out += [f"| `{r.get('case')}` | `{_config(r)}` | {_cell(r, 'min_avg_util')} | {_mems(r)} |" for r in rows]
        out.append("")
    return out


def _per_method(best: Sequence[Row]) -> list[str]:
    picked = [r for r in best if r.get("status") == "ok"]
    methods = sorted({r.get("method", "") for r in picked}, key=lambda m: -_mean(picked, m, "min_avg_util"))
    out = ["## Per method", "", "| method | cases | mean min_avg_util | mean max_mem (larger device) |"]
    out.append("|---|---:|---:|---:|")
    for m in methods:
        mine = [r for r in picked if r.get("method") == m]
        mems = [p for r in mine if (p := peak_mb(r)) is not None]
        mem = f"{statistics.fmean(mems):.1f} MiB" if mems else "-"
        out.append(f"| `{m}` | {len(mine)} | {_mean(picked, m, 'min_avg_util'):.2f} | {mem} |")
    return [*out, ""]


def _decisions(best: Sequence[Row]) -> list[str]:
    out = ["## Quick decision table", "", "| symptom | class | first action | fires for |", "|---|---|---|---|"]
    for cls, symptom, action in DECISION_TABLE:
        cases = sorted(r.get("case", "") for r in best if r.get("class") == cls)
        out.append(f"| {symptom} | {cls} | {action} | {', '.join(f'`{c}`' for c in cases) or '-'} |")
    return [*out, ""]


def _placements(best: Sequence[Row]) -> list[str]:
    """The cases whose placement was measured (`placement=measure`), those where one job per device wins first, by how
    much; none where no case measured it."""
    measured = [r for r in best if r.get("placement")]
    if not measured:
        return []
    out = ["## Placement, measured", "", "| case | winner | one job samples/s | per device samples/s | gain |"]
    out.append("|---|---|---:|---:|---:|")
    ranked = sorted(measured, key=lambda r: (r.get("placement") != "per_device", -(_num(r, "placement_gain") or 0)))
    for r in ranked:
        gain = _num(r, "placement_gain")
        cells = [
            r.get("case", ""),
            r.get("placement", ""),
            r.get("machine_sps_one_job", ""),
            r.get("machine_sps_per_device", ""),
        ]
        out.append("| " + " | ".join([*cells, f"{gain:+.0%}" if gain is not None else ""]) + " |")
    return [*out, ""]


def _failures(best: Sequence[Row], trials: Sequence[Row]) -> list[str]:
    failed = [r for r in trials if r.get("status") not in ("ok", "unmeasured", "interrupted", "")]
    if not failed:
        return ["## Failures", "", "none", ""]
    out = ["## Failures", "", "| case | profile | rung | status | reason | evidence |", "|---|---|---:|---|---|---|"]
    for r in failed:
        evidence = (r.get("evidence") or "").replace("|", "\\|")[:100]
        out.append(
            f"| `{r.get('case')}` | {r.get('variant')} | {r.get('num_envs')} | {r.get('status')} | "
            f"{r.get('reason') or '-'} | {evidence or '-'} |"
        )
    return [*out, ""]


def _config(row: Row) -> str:
    knob, value = row.get("knob") or "num_envs", row.get("num_envs") or "-"
    return f"{row.get('variant')} {'e' if knob == 'num_envs' else knob}{value}"


def _mems(row: Row) -> str:
    mems = [f"{float(v):.0f}" for v in figkeys.values(row, figkeys.MAX_MEM) if v]
    return f"{' / '.join(mems)} MiB" if mems else "-"


def _mean(rows: Sequence[Row], method: str, key: str) -> float:
    values = [v for r in rows if r.get("method") == method and (v := _num(r, key)) is not None]
    return statistics.fmean(values) if values else 0.0


def _cell(row: Row, key: str) -> str:
    value = _num(row, key)
    return f"{value:.2f}" if value is not None else "-"


def _num(row: Row, key: str) -> float | None:
    try:
        text = row.get(key)
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None
