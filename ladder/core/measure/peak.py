"""Whether a closed window can stand for a fit: the trial's memory has outlived its peak (no new peak lately, and an
update inside the window where progress comes in bursts: `outlived_peak`), and how near a cap that peak came.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ladder.core.figkeys import MAX_MEM, values
from ladder.core.measure.cadence import cycle_pause_s, even_s, gaps_s, worked
from ladder.core.measure.clock import CpuClock, cpu_clock
from ladder.core.measure.window import Window
from ladder.core.records import Point, Sample

GROWTH_TOL = 0.02  # memory within 2% (and MIN_GROWTH_MB) of the peak before is no new peak
MIN_GROWTH_MB = 8.0
SETTLE_FRAC = 0.25  # memory must have set no new peak over this share of the window at least ...
SETTLE_GAPS = 2.0  # ... and over this many times the longest gap between progress points (an update's length)
LEARN_WINDOWS = 3.0  # a cadence of unknown kind shows itself within this many windows: a pause, or none at all
CYCLE_UNSEEN = "cycle unseen"  # how a window held for a cadence its reader cannot see begins its reason


def settle_s(points: Sequence[Point], window_s: float) -> float:
    """How long memory must have set no new peak before a window may close: a share of the window, and at least
    twice the longest gap between progress points seen (the trainer's update, where it has one)."""
    gaps = gaps_s(points)
    return max(SETTLE_FRAC * window_s, SETTLE_GAPS * max(gaps, default=0.0))


def still_rising(samples: Sequence[Sample], end_t: float, span_s: float) -> bool:
    """Whether any device's memory set a new peak (more than GROWTH_TOL and MIN_GROWTH_MB above its peak before)
    in the `span_s` before `end_t`; also where nothing was sampled before that span (too young to tell)."""
    rising = False
    for index in {s.index for s in samples}:
        mine = [s for s in samples if s.index == index and s.t <= end_t]
        before = [s.mem_mb for s in mine if s.t <= end_t - span_s]
        recent = [s.mem_mb for s in mine if s.t > end_t - span_s]
        if not before:
            return True
        peak, last = max(before), max(recent, default=0.0)
        rising = rising or (last > peak * (1 + GROWTH_TOL) and last - peak > MIN_GROWTH_MB)
    return rising


def outlived_peak(
    samples: Sequence[Sample],
    points: Sequence[Point],
    window: Window,
    window_s: float,
    per_iteration: bool = True,
    numbered: bool = True,
) -> str:
    """Why the window, closed, still cannot stand for a fit ("" when it can): a fit measured only inside a rollout has
    not met the memory its first update needs. Where the trainer's lines may come from inside a rollout (its own regex
    or JSON lines: `per_iteration` False), the window must hold a pause between two bursts where pauses recur
    (`cadence.cycle_pause_s`; a pause is one the trainer worked through, on its CPU clock where that is measured);
    where none has recurred yet, a trainer that numbers its iterations (`numbered`) must first have printed evenly
    for `LEARN_WINDOWS` windows, and one whose lines are only counted waits for a pause to recur (`CYCLE_UNSEEN`): an
    even run of them may be one long rollout. A trainer that prints once a whole iteration has an update between any
    two lines, so its pauses are stalls, not its cadence. For every trainer, its memory must have set no new peak in
    the window's last `settle_s`."""
    if not per_iteration and (why := no_cycle_in(samples, points, window, window_s, numbered)):
        return why
    span = settle_s(points, window_s)
    if samples and still_rising(samples, window.end_t, span):
        return f"its memory was still rising in the last {span:.1f} s of the window"
    return ""


def no_cycle_in(
    samples: Sequence[Sample], points: Sequence[Point], window: Window, window_s: float, numbered: bool
) -> str:
    """Why a window of lines that may come from inside a rollout holds no whole cycle ("" when it does)."""
    clock = cpu_clock(samples)
    gap = cycle_pause_s(points, clock)
    if gap is not None and held_update(points, window, gap, clock):
        return ""
    if gap is not None:
        return f"its progress comes in bursts (pauses of {gap:.1f} s) and the window held no pause: no update yet"
    if not numbered:
        ran = points[-1].t - points[0].t if points else 0.0
        return (
            f"{CYCLE_UNSEEN}: no pause it worked through has recurred in its {ran:.0f} s of progress, and its lines "
            "are only counted (its regex has no iter group): they may all come from inside one rollout"
        )
    even = even_s(points, clock)
    if even < LEARN_WINDOWS * window_s:
        return (
            f"its cadence is unknown (a regex of its own): no pause has recurred in its progress and it has printed "
            f"evenly for {even:.1f} s only of the {LEARN_WINDOWS * window_s:.0f} s ({LEARN_WINDOWS:g} windows) that "
            f"show whether it pauses for updates, and an update comes only after a whole rollout"
        )
    return ""


def held_update(points: Sequence[Point], window: Window, gap: float, clock: CpuClock | None) -> bool:
    """Whether the window holds a silence at least half the trainer's pause that it worked through (`worked`)."""
    gaps = [(a.t, b.t - a.t) for a, b in zip(points, points[1:], strict=False) if b.t > a.t]
    inside = [(t, g) for t, g in worked(gaps, clock) if t >= window.start_t and t + g <= window.end_t]
    return any(g >= gap / 2 for _, g in inside)


def is_cycle_unseen(unsettled: str) -> bool:
    """Whether a held window's reason (`outlived_peak`) is that its reader could not see the trainer's cycle."""
    return unsettled.startswith(CYCLE_UNSEEN)


def near_cap(figures: Mapping[str, float], card_mb: float | None, headroom: float) -> str:
    """The cap a trial's memory peak came within `headroom` (a share) of, as a person reads it ("" when none did):
    its memory cgroup (the peak of all its processes against `workload.host_mem_limit_gb`, less the page cache still
    charged at the end: a cgroup fills with cache up to its cap, and reclaims it rather than kill), the emulated card
    (what the trainer's allocator held against its size) or, on a GPU, the card itself (`card_mb`, NVML's device
    memory)."""
    cgroup = figures.get("cgroup_peak_mb")
    caps = [
        (
            "memory cgroup",
            None if cgroup is None else cgroup - figures.get("cgroup_file_mb", 0.0),
            figures.get("cgroup_limit_mb"),
        ),
        ("emulated card", figures.get("cap_used_mb"), figures.get("cap_mb")),
        ("GPU memory", max(values(figures, MAX_MEM), default=None), card_mb),
    ]
    for name, peak, cap in caps:
        if peak is not None and cap and peak >= (1.0 - headroom) * cap:
            return f"{peak:.0f}/{cap:.0f} MiB of its {name} ({peak / cap:.0%}, within {headroom:.0%} of it)"
    return ""
