"""The machine's answer to placement: the pick as one job over N devices against N one-device jobs of its profile
side by side (`placement=measure`). Pure: the pick's record and the side-by-side trials' records (phase
`placement`) in; the next rung to run them at, and the answer (winner, machine samples/s, per day), out.

The one job's figures are the pick's own window; the side-by-side jobs run together, one device each, at the
pick's rung first and a rung lower after each step-down failure, as the walk steps. The winner must beat the
other beyond the noise: the pick rule's tie band (the 95% intervals and the run-to-run spread, `pick.reach`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ladder.core import figkeys, pick
from ladder.core.records import Objective, Phase, Status, TrialRecord, Word
from ladder.core.walk.facts import STEP_DOWN

SPS = Objective.SAMPLES_PER_S
DAY_S = 86400.0
MAX_RETRIES = 2  # sets at one rung that a launch trouble unrelated to it (a port in use) may cost
# what a side-by-side trial records in its info, to be found again (by a resumed sweep too)
OF, SET, TWIN, TWINS, STOPPED = "placement_of", "placement_set", "twin", "twins", "twin_stopped"
COLUMNS = (
    "placement",
    "placement_rung",
    "machine_sps_one_job",
    "machine_sps_per_device",
    "machine_sps_per_device_lo",
    "machine_sps_per_device_hi",
    "placement_gain",
    "placement_note",
)


class Mode(Word):
    """`placement=`: when the phase runs."""

    AUTO = "auto"  # where the pick is throughput-bound (on GPUs: CPU figures have no class)
    MEASURE = "measure"  # for every case with N >= 2 devices a trial
    OFF = "off"  # never


class Winner(Word):
    ONE_JOB = "one_job"  # one job over N devices gives the machine more samples/s
    PER_DEVICE = "per_device"  # N one-device jobs side by side do
    TIE = "tie"  # within the noise of each other
    FAILED = "failed"  # the one-device jobs failed for a reason that is not their size: no answer


@dataclass(frozen=True)
class TwinSet:
    """One launch of the side-by-side jobs: its twins' records, in twin order."""

    rung: int
    twins: tuple[TrialRecord, ...]

    @property
    def ok(self) -> bool:
        return all(t.status is Status.OK and SPS in t.figures for t in self.twins)

    @property
    def failure(self) -> TrialRecord | None:
        """The twin whose own failure ended the set (a twin stopped for it never is); None for none."""
        own = [t for t in self.twins if t.status not in (Status.OK, Status.INTERRUPTED) and not t.info.get(STOPPED)]
        return min(own, key=lambda t: t.number, default=None)


@dataclass(frozen=True)
class Rate:
    value: float
    lo: float
    hi: float

    def per_day(self) -> float:
        return self.value * DAY_S


@dataclass(frozen=True)
class Answer:
    winner: Winner
    n: int  # devices: the one job's ranks, and the jobs side by side
    one_job: Rate
    per_device: Rate | None  # the side-by-side jobs' machine samples/s (None: they never ran whole)
    rung: int  # the side-by-side jobs' rung
    note: str


def key_of(chosen: TrialRecord) -> str:
    """The pick a side-by-side trial is measured against (its profile, rung and phase)."""
    return f"{chosen.profile}:{chosen.num_envs}:{chosen.phase}"


def sets(records: Sequence[TrialRecord], chosen: TrialRecord) -> list[TwinSet]:
    """The side-by-side launches measured against `chosen`, oldest first."""
    groups: dict[str, list[TrialRecord]] = {}
    for r in sorted(records, key=lambda r: r.number):
        if r.phase is Phase.PLACEMENT and r.info.get(OF) == key_of(chosen):
            groups.setdefault(r.info.get(SET, ""), []).append(r)
    ordered = sorted(groups.values(), key=lambda g: g[0].number)
    return [TwinSet(g[0].num_envs, tuple(sorted(g, key=lambda r: int(r.info.get(TWIN, "0"))))) for g in ordered]


def next_rung(done: Sequence[TwinSet], start: int, rungs: Sequence[int]) -> int | None:
    """The rung the side-by-side jobs run at next: the pick's first; the same again after an interrupted set or
    launch trouble; the next lower rung after a step-down failure; None once measured, or nothing is left."""
    if not done:
        return start
    last = done[-1]
    if last.ok:
        return None
    failure = last.failure
    if failure is None:  # interrupted (the sweep was stopped): run it again
        return last.rung
    if failure.status is Status.RETRY:
        return last.rung if sum(1 for s in done if s.rung == last.rung) <= MAX_RETRIES else None
    if failure.status in STEP_DOWN:
        return max((r for r in rungs if r < last.rung), default=None)
    return None


def answer(chosen: TrialRecord, done: Sequence[TwinSet]) -> Answer | None:
    """The answer of the latest side-by-side launch against `chosen` (a step-down failure: the one job wins until a
    lower rung fits); None where none ended yet (or the pick has no samples/s)."""
    if not done or SPS not in chosen.figures:
        return None
    one = _rate([chosen])
    last, n = done[-1], len(done[-1].twins)
    if not last.ok:
        failure = last.failure
        if failure is None or next_rung(done, last.rung, [last.rung]) == last.rung:
            return None  # interrupted, or launch trouble it runs again
        said = f"{failure.status} at {last.rung} ({' '.join(failure.evidence.split())[:120]})"
        fits = failure.status in STEP_DOWN
        winner = Winner.ONE_JOB if fits else Winner.FAILED
        why = "it does not fit one device" if fits else "no answer"
        return Answer(winner, n, one, None, last.rung, f"the {n} one-device jobs failed: {said}; {why}")
    side = _rate(list(last.twins))
    winner = _winner(one, side)
    return Answer(winner, n, one, side, last.rung, _note(winner, n, one, side, chosen, last))


def _rate(records: Sequence[TrialRecord]) -> Rate:
    """The machine's samples/s over jobs run together: their sum, its interval the halves added in quadrature."""
    values = [r.figures[SPS] for r in records]
    lo = [r.figures.get(f"{SPS}_lo", v) for r, v in zip(records, values, strict=True)]
    hi = [r.figures.get(f"{SPS}_hi", v) for r, v in zip(records, values, strict=True)]
    total = sum(values)
    down = math.sqrt(sum((v - low) ** 2 for v, low in zip(values, lo, strict=True)))
    up = math.sqrt(sum((high - v) ** 2 for v, high in zip(values, hi, strict=True)))
    return Rate(total, max(0.0, total - down), total + up)


def _winner(one: Rate, side: Rate) -> Winner:
    """The higher rate, unless the lower one's tie band (`pick.reach`) reaches it."""
    top, low = (one, side) if one.value >= side.value else (side, one)
    if pick.reach(low.value, low.hi, pick.noise_of(SPS)) >= top.value:
        return Winner.TIE
    return Winner.ONE_JOB if top is one else Winner.PER_DEVICE


def gain(a: Answer) -> float | None:
    """The side-by-side jobs' machine samples/s over the one job's, less one (+0.25: a quarter more)."""
    return a.per_device.value / a.one_job.value - 1 if a.per_device and a.one_job.value > 0 else None


def _note(winner: Winner, n: int, one: Rate, side: Rate, chosen: TrialRecord, last: TwinSet) -> str:
    g = side.value / one.value - 1 if one.value > 0 else 0.0
    noise = f"95% intervals [{one.lo:.0f}, {one.hi:.0f}] and [{side.lo:.0f}, {side.hi:.0f}], run-to-run ±"
    noise += f"{pick.noise_of(SPS):.0%}"
    head = {
        Winner.PER_DEVICE: f"{n} one-device jobs side by side win",
        Winner.ONE_JOB: f"one job over {n} devices wins",
        Winner.TIE: "a tie within the noise",
    }[winner]
    day = f"{(side.per_day() - one.per_day()) / 1e6:+.1f}M samples/day side by side"
    return (
        f"{head}: {side.value:.0f} samples/s side by side (at {last.rung} each) against {one.value:.0f} for one "
        f"job ({g:+.0%}, {day}); {noise}; util {_each(last, figkeys.AVG_UTIL, '%')} vs "
        f"{_figs(chosen.figures, figkeys.AVG_UTIL, '%')}, memory MiB {_each(last, figkeys.MAX_MEM, '')} vs "
        f"{_figs(chosen.figures, figkeys.MAX_MEM, '')}{_overlap_words(last)}"
    )


def overlap(s: TwinSet) -> float | None:
    """How much of the side-by-side jobs' windows ran at the same time (0..1 of the longest; they launch together,
    so their windows' offsets from launch compare); None where a window's span is unknown."""
    if any("window_start_s" not in t.figures or "window_s" not in t.figures for t in s.twins):
        return None
    starts = [t.figures["window_start_s"] for t in s.twins]
    ends = [t.figures["window_start_s"] + t.figures["window_s"] for t in s.twins]
    longest = max(t.figures["window_s"] for t in s.twins)
    return max(0.0, min(ends) - max(starts)) / longest if longest > 0 else None


def _overlap_words(s: TwinSet) -> str:
    share = overlap(s)
    return "" if share is None else f"; their windows ran together for {share:.0%} of the longest"


def _each(s: TwinSet, stem: str, unit: str) -> str:
    return "/".join(_figs(t.figures, stem, unit) for t in s.twins)


def _figs(figures: Mapping[str, float], stem: str, unit: str) -> str:
    return ",".join(f"{v:.0f}{unit}" for v in figkeys.values(figures, stem)) or "?"


# ---------------------------------------------------------------- the row


def columns(a: Answer) -> dict[str, str]:
    """The answer's best_by_case.tsv columns (`COLUMNS`)."""
    g = gain(a)
    return {
        "placement": str(a.winner),
        "placement_rung": str(a.rung),
        "machine_sps_one_job": f"{a.one_job.value:.1f}",
        "machine_sps_per_device": f"{a.per_device.value:.1f}" if a.per_device else "",
        "machine_sps_per_device_lo": f"{a.per_device.lo:.1f}" if a.per_device else "",
        "machine_sps_per_device_hi": f"{a.per_device.hi:.1f}" if a.per_device else "",
        "placement_gain": f"{g:.3f}" if g is not None else "",
        "placement_note": a.note,
    }


def statement(a: Answer) -> str:
    """What the measured answer says to do, as the class's action says it."""
    g = gain(a)
    by = f" by {abs(g):.0%} of the machine's samples/s" if g is not None else ""
    return {
        Winner.PER_DEVICE: f"measured: {a.n} one-device jobs side by side beat one job over {a.n} devices{by}: run "
        f"them side by side",
        Winner.ONE_JOB: f"measured: one job over {a.n} devices beats {a.n} one-device jobs side by side{by}: keep "
        f"the one job",
        Winner.TIE: f"measured: one job over {a.n} devices and {a.n} one-device jobs side by side tie within the "
        f"noise: either serves",
        Winner.FAILED: f"measured: the one-device jobs failed, no placement answer: keep the one job over {a.n}",
    }[a.winner]


def with_answer(row: dict[str, str], a: Answer | None, throughput: bool) -> dict[str, str]:
    """The case's row with the answer's columns; its action the measured statement (the throughput-bound class's
    advice replaced by it, any other's followed by it)."""
    if a is None:
        return row
    action = statement(a) if throughput else f"{row.get('action', '')}; {statement(a)}".lstrip("; ")
    return row | columns(a) | {"action": action}


def plan_words(mode: Mode, n: int, device: str) -> str:
    """What the dry run says of the phase: whether it runs, on what, and the setting that changes it."""
    jobs = f"the pick as one job over {n} devices against {n} one-device jobs side by side"
    if n < 2:
        return "none: one device a trial (workload.nproc=1)"
    if mode is Mode.OFF:
        return "off (placement=off)"
    if mode is Mode.MEASURE:
        return f"measured: {jobs} (placement=measure)"
    if device != "cuda":
        return "off on CPU: its figures have no class (placement=auto); placement=measure measures it"
    return f"measured where the pick is throughput-bound: {jobs} (placement=auto; measure: always, off: never)"
