"""The data behind the report: pure functions from the sweep's rows and lines to the series each plot draws.

Per case, util, samples/s (with its 95% interval) and peak memory against the walked knob per profile; failed
trials and trials cut short are marks at their rung (named by their reason), never figures beside measured ones
(memory alone keeps a failure's peak before it failed, which is what shows it went over);
per trial, util and memory per device and step time per iteration over seconds since launch, with the warm-up and
the measured window (the one-page Markdown summary is `page`'s). No file, clock or matplotlib in here.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ladder.core import figkeys
from ladder.core.records import Objective
from ladder.workloads.progress import parse_line

Row = dict[str, str]


@dataclass(frozen=True)
class Series:
    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    failed: bool = False  # drawn as crosses: rungs that did not run through (the label names the reason)
    lo: tuple[float, ...] = ()  # the bottom of each point's 95% interval (samples/s), () = none
    hi: tuple[float, ...] = ()  # ... and its top
    no_interval: tuple[float, ...] = ()  # the x of points whose interval is unknown (too few points in the window)


@dataclass(frozen=True)
class CaseChart:
    """Util and peak memory against num_envs, one series per profile (and one per profile x failure reason)."""

    case: str
    util: tuple[Series, ...]
    mem: tuple[Series, ...]
    rungs: tuple[int, ...]
    card_mem_mb: float | None  # the card's memory (the emulated cap on CPU); None: unknown, no line
    card_label: str
    util_label: str
    mem_label: str
    best_util: Series | None = None  # the case's pick (best_by_case.tsv), one point
    best_mem: Series | None = None
    mem_title: str = "peak memory over the trial (failed rungs: the peak before the failure)"
    sps: tuple[Series, ...] = ()  # samples/s of the measured ok trials, with their intervals
    marks: tuple[Series, ...] = ()  # failed or cut-short trials: only x (their rungs), drawn at the foot of a panel
    best_sps: Series | None = None
    knob: str = "num_envs"  # what the rungs set (the x axis)


@dataclass(frozen=True)
class TrialChart:
    """One trial over time (seconds since launch): util and memory per device, step time per iteration."""

    title: str
    util: tuple[Series, ...]
    mem: tuple[Series, ...]
    step: Series
    warmup: tuple[float, float] | None  # (launch, window start)
    window: tuple[float, float] | None  # the measured window
    end_s: float | None  # when a trial that failed stopped reporting (its last sample)
    card_mem_mb: float | None
    util_label: str
    mem_label: str
    caption: str  # the verdict's evidence
    cap: tuple[float, str] | None = None  # on a host: the emulated card's cap per rank (MiB) and its label


@dataclass(frozen=True)
class TrialFiles:
    samples: list[Row] = field(default_factory=list)  # samples.csv rows: t, index, util, mem_mb
    progress: list[str] = field(default_factory=list)  # progress.jsonl lines
    verdict: dict[str, str] = field(default_factory=dict)
    launched_t: float | None = None  # unix time the trial folder's cmd.txt was written: just before the launch


# ---------------------------------------------------------------- pure: rows -> series


FIGURES = {"samples_per_s": "samples/s", "min_avg_util": "min avg util"}  # the figures a pick is made on
DEFAULT_OBJECTIVE = Objective.MIN_AVG_UTIL.value  # objective='s default, for rows written before its column


def num(row: Row, key: str) -> float | None:
    try:
        value = float(row.get(key, ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def peak_mem(row: Row) -> float | None:
    """The largest max_memN; None where none was measured (a 0 in trials.tsv fills a device the trial has no
    figure for: a probe whose ranks died before the sampler saw them)."""
    mems = [v for k in figkeys.keys(row, figkeys.MAX_MEM) if (v := num(row, k)) is not None and v > 0]
    return max(mems) if mems else None


def is_host(rows: Sequence[Row]) -> bool:
    return any(r.get("source") == "host" for r in rows)


def trial_labels(host: bool) -> tuple[str, str]:
    """Axis labels for util and memory over time: CPU% and PSS per rank where there is no GPU, else NVML's."""
    if host:
        return "CPU util per rank (% of one core)", "PSS per rank (MiB)"
    return "GPU util (%)", "GPU memory used (MiB)"


def case_labels(host: bool) -> tuple[str, str]:
    """Axis labels for the per-rung figures (trials.tsv's min_avg_util and the largest max_memN)."""
    if host:
        return "CPU util: min over ranks of the mean (% of one core)", "peak PSS or cgroup, max over ranks (MiB)"
    return "GPU util: min over GPUs of the mean (%)", "peak GPU memory used, max over GPUs (MiB)"


def card_memory(rows: Sequence[Row]) -> tuple[float | None, str]:
    """The card the trials' memory is drawn against: an emulated one held by a ballast, else the recorded card."""
    held = next((mb for r in rows if (mb := num(r, "ballast_card_mb"))), None)
    if held is not None:
        return held, f"emulated card (a ballast held the rest): {held:.0f} MiB"
    row = next((r for r in rows if num(r, "gpu_mem_total")), None)
    if row is None:
        return None, ""
    mb = num(row, "gpu_mem_total")
    kind = "emulated card (per rank)" if row.get("gpu_name") == "cpu" else row.get("gpu_name", "card")
    return mb, f"{kind}: {mb:.0f} MiB"


def series_label(row: Row) -> str:
    phase = row.get("phase", "probe")
    return row.get("variant", "?") + ("" if phase in ("probe", "") else f" ({phase})")


def measured(row: Row) -> bool:
    """An ok trial whose window ran to its end (a cut one stopped early: its figures are not comparable)."""
    return row.get("status") == "ok" and not num(row, "cut")


def case_chart(trials: Sequence[Row], case: str, best: Sequence[Row] = ()) -> CaseChart:
    """`trials`: trials.tsv rows (interrupted ones are left out: they run again); `best`: best_by_case.tsv rows."""
    rows = [r for r in trials if r.get("case") == case and r.get("status") != "interrupted"]
    whole = [r for r in rows if measured(r)]
    card_mb, card_label = card_memory(rows)
    util_label, mem_label = case_labels(is_host(rows))
    memory: Callable[[Row], float | None] = peak_mem
    if any(num(r, "cap_used_mb") for r in rows):  # the trainer reported what the emulated card limits: compare that
        memory = lambda r: num(r, "cap_used_mb") if r.get("status") == "ok" else card_mb  # noqa: E731
        mem_label = "use of the emulated card, max over ranks (MiB)"
        mem_title = "what the emulated card limits (failed rungs went over it: drawn at the card)"
    pick = next((r for r in best if r.get("case") == case and r.get("status") == "ok"), None)
    return CaseChart(
        case=case,
        util=_rung_series(whole, lambda r: num(r, "min_avg_util")),
        mem=_rung_series(rows, memory),
        rungs=tuple(sorted({int(r["num_envs"]) for r in rows}, reverse=True)),
        card_mem_mb=card_mb,
        card_label=card_label,
        util_label=util_label,
        mem_label=mem_label,
        best_util=_best_point(pick, num(pick, "min_avg_util") if pick else None),
        best_mem=_best_point(pick, memory(pick) if pick else None),
        **({"mem_title": mem_title} if memory is not peak_mem else {}),
        sps=_sps_series(whole),
        marks=_marks(rows),
        best_sps=_best_point(pick, num(pick, "samples_per_s") if pick else None),
        knob=next((r["knob"] for r in rows if r.get("knob")), "num_envs"),
    )


def _sps_series(rows: Sequence[Row]) -> tuple[Series, ...]:
    """samples/s per profile through its measured rungs, each with its interval; where the window held too few
    points for one (recorded as 0 to inf), the point is listed in `no_interval` and has no bar. A rung measured in
    several windows shows the one the pick counts (the lower middle by value, `pick.median_repeats`)."""
    windows: dict[str, dict[int, list[tuple[float, float, float]]]] = {}
    for row in rows:
        if (v := num(row, "samples_per_s")) is not None:
            lo, hi = num(row, "samples_per_s_lo"), num(row, "samples_per_s_hi")
            bounds = (lo, hi) if lo is not None and hi is not None else (v, v)
            windows.setdefault(series_label(row), {}).setdefault(int(row["num_envs"]), []).append((v, *bounds))
    groups = {
        label: {rung: sorted(ws)[(len(ws) - 1) // 2] for rung, ws in by_rung.items()}
        for label, by_rung in windows.items()
    }
    out = []
    for label, pts in sorted(groups.items()):
        xs = sorted(pts)
        out.append(
            Series(
                label,
                tuple(float(x) for x in xs),
                tuple(pts[x][0] for x in xs),
                lo=tuple(pts[x][1] for x in xs),
                hi=tuple(pts[x][2] for x in xs),
                no_interval=tuple(float(x) for x in xs if pts[x][1] == pts[x][2]),
            )
        )
    return tuple(out)


def _marks(rows: Sequence[Row]) -> tuple[Series, ...]:
    """The rungs of failed trials (per profile and reason) and of trials cut short (per profile): no figures."""
    groups: dict[str, set[int]] = {}
    for row in rows:
        if row.get("status") == "ok" and not num(row, "cut"):
            continue
        why = "cut short" if row.get("status") == "ok" else "failed: " + (row.get("reason") or row.get("status") or "?")
        groups.setdefault(f"{series_label(row)} {why}", set()).add(int(row["num_envs"]))
    return tuple(
        Series(label, tuple(float(x) for x in sorted(xs)), (), failed=True) for label, xs in sorted(groups.items())
    )


def _best_point(pick: Row | None, y: float | None) -> Series | None:
    if pick is None or y is None:
        return None
    rung = rung_label(pick.get("knob") or "num_envs", int(pick["num_envs"]))
    return Series(f"best: {series_label(pick)} {rung}", (float(pick["num_envs"]),), (y,))


def rung_label(knob: str, rung: int) -> str:
    return f"e{rung}" if knob == "num_envs" else f"{knob}={rung}"


def _rung_series(rows: Sequence[Row], value: Callable[[Row], float | None]) -> tuple[Series, ...]:
    """One line per profile through its ok rungs; one set of crosses per profile and failure reason (a failure
    that measured nothing sits at 0). Of two trials at one rung and outcome, the later one counts."""
    groups: dict[tuple[str, str], dict[int, float]] = {}
    for row in rows:
        why = "" if row.get("status") == "ok" else row.get("reason") or row.get("status") or "?"
        groups.setdefault((series_label(row), why), {})[int(row["num_envs"])] = value(row) or 0.0
    return tuple(_series(label, why, pts) for (label, why), pts in sorted(groups.items()))


def _series(label: str, why: str, points: dict[int, float]) -> Series:
    xs = sorted(points)
    name = f"{label} failed: {why}" if why else label
    return Series(name, tuple(float(x) for x in xs), tuple(points[x] for x in xs), failed=bool(why))


def launch_t(files: TrialFiles) -> float | None:
    """Launch, as near as the files tell: cmd.txt is written just before it; else the first sample or the trainer's
    start event, whichever came first (both come later: host sampling starts once the ranks exist)."""
    if files.launched_t is not None:
        return files.launched_t
    times = [float(s["t"]) for s in files.samples[:1]]
    for line in files.progress[:1]:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            times.append(float(json.loads(line)["t"]))
    return min(times) if times else None


def trial_chart(row: Row, files: TrialFiles) -> TrialChart:
    t0 = launch_t(files) or 0.0
    source = row.get("source") or "host"
    util_label, mem_label = trial_labels(source == "host")
    window = trial_window(row)
    samples = [s for s in files.samples if s.get("source", source) == source]  # on a GPU: NVML's, not the host's
    return TrialChart(
        title=_trial_title(row, files.verdict),
        util=_device_series(samples, "util", t0, source),
        mem=_device_series(samples, "mem_mb", t0, source) + _device_series(samples, "proc_mem_mb", t0, source),
        step=_step_series(files.progress, t0),
        warmup=(0.0, window[0]) if window else None,
        window=window,
        end_s=None if window or not samples else round(float(samples[-1]["t"]) - t0, 3),
        card_mem_mb=None if source == "host" else card_memory([row])[0],  # RSS is not what an emulated card caps
        util_label=util_label,
        mem_label=mem_label,
        caption=str(files.verdict.get("evidence", row.get("evidence", ""))),
        cap=_host_cap(row) if source == "host" else None,
    )


def _host_cap(row: Row) -> tuple[float, str] | None:
    """The emulated card on a CPU run: it caps each rank's data segment, which RSS follows from below."""
    mb = num(row, "cap_mb") or (num(row, "gpu_mem_total") if row.get("gpu_name") == "cpu" else None)
    return (mb, f"emulated card: {mb:.0f} MiB per rank (caps the data segment)") if mb else None


def trial_window(row: Row) -> tuple[float, float] | None:
    """The measured window in seconds since launch: `window_end_s` where recorded, else the start plus the span of
    the progress points that measured samples/s (`window_s`, which runs up to the point that closed the window)."""
    start, end, span = num(row, "window_start_s"), num(row, "window_end_s"), num(row, "window_s")
    if start is None or (end is None and span is None):
        return None
    return start, end if end is not None else start + (span or 0.0)


def _trial_title(row: Row, verdict: dict[str, str]) -> str:
    status = verdict.get("status") or row.get("status", "?")
    reason = verdict.get("reason") or row.get("reason", "")
    name = Path(row.get("trial_dir", "")).name or f"{row.get('variant')}_e{row.get('num_envs')}"
    return f"{row.get('case')} {name}: {status}" + (f" ({reason})" if reason else "")


PROC_SUFFIX = ": the trial's processes"
SERIES_NAMES = {"util": "{name} {i}", "mem_mb": "{name} {i}", "proc_mem_mb": "{name} {i}" + PROC_SUFFIX}


def _device_series(samples: Sequence[Row], key: str, t0: float, source: str) -> tuple[Series, ...]:
    """One series per device index; samples without a value for `key` (proc_mem_mb between its reads) are skipped."""
    by_index: dict[int, list[tuple[float, float]]] = {}
    for s in samples:
        if (value := num(s, key)) is not None:
            by_index.setdefault(int(s["index"]), []).append((round(float(s["t"]) - t0, 3), value))
    name = "rank" if source == "host" else "GPU"
    return tuple(
        Series(SERIES_NAMES[key].format(name=name, i=i), tuple(x for x, _ in pts), tuple(y for _, y in pts))
        for i, pts in sorted(by_index.items())
    )


def _step_series(progress: Sequence[str], t0: float) -> Series:
    points = [p for p in (parse_line(line) for line in progress) if p is not None and p.step_time_s is not None]
    return Series(
        "step time", tuple(round(p.t - t0, 3) for p in points), tuple(float(p.step_time_s or 0.0) for p in points)
    )


def trial_plot_name(row: Row) -> str:
    return f"{row.get('case')}/{Path(row.get('trial_dir', '')).name or row.get('number', 'trial')}.png"
