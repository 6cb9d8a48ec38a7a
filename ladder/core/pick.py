"""Which rung counts: every pick rule over one case's records (the pick, its ties on noise, confirmation, the
fallback row, what a launch must beat). Pure: records in, answers out. The sweep asks this module, and only this
one; the rule and its reasons are in docs/searching.md ("The pick rule")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from ladder.core import figkeys
from ladder.core.measure import rates
from ladder.core.records import NO_MEMORY_REASONS, Objective, Phase, Reason, Status, TrialRecord

# a failure whose memory peak reached this share of its card was under memory pressure, whatever its lines say
# (`ladder.core.walk.bottom`: such a failure always counts as num_envs')
NEAR_FULL = 0.9


def names_no_memory(reason: Reason, frac: float | None) -> bool:
    """A failure's evidence names no memory (`NO_MEMORY_REASONS`) and its card was not near full (`NEAR_FULL`)."""
    return reason in NO_MEMORY_REASONS and not (frac is not None and frac >= NEAR_FULL)


OTHER: dict[str, str] = {  # what breaks a tie on the objective
    Objective.MIN_AVG_UTIL: Objective.SAMPLES_PER_S,
    Objective.SAMPLES_PER_S: Objective.MIN_AVG_UTIL,
    Objective.SAMPLES_PER_JOULE: Objective.SAMPLES_PER_S,  # of two as frugal, the faster
}
REPEAT_FIGURES = ("repeats", "unstable", "repeat_spread", "ci_frac")  # about all repeats of a configuration
WIDE_WINDOWS = "wide_windows"  # how many of a configuration's repeats ran a whole window that was wide (`window_wide`)
# objectives whose noise is a half-width figure, not a _lo/_hi interval
SPREAD: dict[str, str] = {Objective.MIN_AVG_UTIL: "util_spread"}
# How far two launches of one configuration may differ beyond one window's interval, as a fraction of the objective
# (a difference within it is a tie). Samples/s moves from run to run; min_avg_util's spread already spans the devices.
# Samples per joule is samples/s over the power drawn meanwhile: it moves from run to run as samples/s does at least.
RUN_TO_RUN: dict[str, float] = {Objective.SAMPLES_PER_S: 0.05, Objective.SAMPLES_PER_JOULE: 0.05}
T = TypeVar("T")


@dataclass(frozen=True)
class Candidate(Generic[T]):
    """One configuration as the pick rule sees it."""

    value: float  # the objective
    envs: int
    item: T
    hi: float | None = None  # the top of its tie band: its 95% interval, or the run-to-run `reach` (None: neither)
    other: float | None = None  # the figure that breaks a tie (OTHER)


@dataclass(frozen=True)
class Choice(Generic[T]):
    """The pick, and the ties it was chosen among (by what)."""

    item: T
    tied: tuple[T, ...] = ()  # the others within the noise of the best value
    by: str = ""  # how the tie was broken: "num_envs", the other figure's name, or the objective's own value


# ---------------------------------------------------------------- the pick rule


def choose(candidates: Sequence[Candidate[T]], other: str = "other") -> Choice[T] | None:
    """The pick among `candidates` by the module's rule; `other` names the tie-breaking figure in the answer."""
    if not candidates:
        return None
    top = max(candidates, key=lambda c: (c.value, c.envs))
    group = [c for c in candidates if c is top or tied(c, top)]
    use_other = all(c.other is not None for c in group)
    winner = max(group, key=lambda c: (c.envs, c.other if use_other else 0.0, c.value, -_top(c)))
    rest = tuple(c.item for c in group if c is not winner)
    if not rest:
        return Choice(winner.item)
    rivals = [c for c in group if c is not winner]
    by = "num_envs" if all(c.envs < winner.envs for c in rivals) else other if use_other else "value"
    return Choice(winner.item, rest, by)


def _top(c: Candidate[Any]) -> float:
    return c.hi if c.hi is not None else c.value


def tied(c: Candidate[Any], top: Candidate[Any]) -> bool:
    """Is `c` within the measured noise of the best value `top`?"""
    return c.value >= top.value or (c.hi is not None and c.hi >= top.value)


def reach(value: float, hi: float | None, noise: float) -> float:
    """The top of `value`'s tie band: its measured interval's top, or `noise` (a fraction, `RUN_TO_RUN`) above it,
    whichever is higher."""
    return max(value if hi is None else hi, value + abs(value) * noise)


def noise_of(objective: str) -> float:
    """The run-to-run noise the pick allows `objective` beyond one window's interval (`RUN_TO_RUN`; 0: none)."""
    return RUN_TO_RUN.get(objective, 0.0)


def pick(scored: Sequence[tuple[float, float | None, int, T]]) -> T | None:
    """The rule on (value, top of its interval or None, num_envs, item), as the walk holds its attempts."""
    choice = choose([Candidate(v, n, item, hi=hi) for v, hi, n, item in scored])
    return choice.item if choice else None


def to_beat(value: float, hi: float | None, envs: int, rung: int, noise: float = 0.0) -> float:
    """What a trial at `rung` must reach (the top of its interval) to become the pick over the best so far
    (`value`, `hi`, `envs`): for fewer envs, the top of the best's tie band (`reach`), since the best would tie back;
    for as many or more, the best's value less the run-to-run `noise` (its own band reaches that far up). Below
    this, by the pick rule, it cannot become the pick, whatever comes later."""
    return reach(value, hi, noise) if rung < envs else value / (1.0 + noise)


# ---------------------------------------------------------------- over records


def objective_value(record: TrialRecord, objective: str) -> float | None:
    return record.figures.get(objective) if record.status is Status.OK else None


def interval(record: TrialRecord, objective: str) -> tuple[float | None, float | None]:
    """The objective's measured 95% interval: `<objective>_lo/_hi`, or the value ± its spread figure (util)."""
    f = record.figures
    if (spread := SPREAD.get(objective)) and spread in f and objective in f:
        return f[objective] - f[spread], f[objective] + f[spread]
    return f.get(f"{objective}_lo"), f.get(f"{objective}_hi")


def candidates(records: Sequence[TrialRecord], objective: str) -> list[Candidate[TrialRecord]]:
    """The ok records as candidates, repeats as their median."""
    out, noise = [], noise_of(objective)
    for r in median_repeats(records, objective):
        if (value := objective_value(r, objective)) is not None:
            other = r.figures.get(OTHER.get(objective, ""))
            hi = interval(r, objective)[1]
            out.append(Candidate(value, r.num_envs, r, reach(value, hi, noise) if noise else hi, other))
    return out


def choose_best(records: Sequence[TrialRecord], objective: str) -> Choice[TrialRecord] | None:
    """The case's pick among its ok records, with its ties."""
    return choose(candidates(records, objective), OTHER.get(objective, "other"))


def best(records: Sequence[TrialRecord], objective: str) -> TrialRecord | None:
    choice = choose_best(records, objective)
    return choice.item if choice else None


def median_repeats(records: Sequence[TrialRecord], objective: str) -> list[TrialRecord]:
    """A configuration measured several times (`measure.repeats`: same profile, rung and phase, each ok) as one
    record: its median repeat by `objective` (the lower middle one for an even count), so that the best of n
    repeats never stands for the configuration; repeats whose own window was wide (`window_wide`) count only
    where none was narrow, carrying the repeat verdict over all of them (`REPEAT_FIGURES`, from
    the last repeat, which saw them all). Every other record stays; the order of first appearance is kept."""
    groups: dict[tuple[str, int, str], list[TrialRecord]] = {}
    slots: list[TrialRecord | tuple[str, int, str]] = []
    for record in records:
        if objective_value(record, objective) is None:
            slots.append(record)
            continue
        key = (record.profile, record.num_envs, str(record.phase))
        if key not in groups:
            groups[key] = []
            slots.append(key)
        groups[key].append(record)
    return [slot if isinstance(slot, TrialRecord) else _median_of(groups[slot], objective) for slot in slots]


def window_wide(record: TrialRecord) -> bool:
    """An ok record whose own window ran whole and was still wide (`rates.window_wide`): where a repeat of the same
    configuration measured a narrow window, it does not count (`median_repeats`), and the walk gives an incumbent it
    says fell behind a second window (`ladder.core.walk.descent`)."""
    return record.status is Status.OK and rates.window_wide(record.figures)


def _median_of(repeats: list[TrialRecord], objective: str) -> TrialRecord:
    if len(repeats) == 1:
        return repeats[0]
    narrow = [r for r in repeats if not window_wide(r)]
    ranked = sorted(narrow or repeats, key=lambda r: (objective_value(r, objective), r.number))
    median, last = ranked[(len(ranked) - 1) // 2], max(repeats, key=lambda r: r.number)
    verdict = {k: v for k, v in last.figures.items() if k in REPEAT_FIGURES}
    return replace(median, figures={**median.figures, **verdict, WIDE_WINDOWS: float(len(repeats) - len(narrow))})


# ---------------------------------------------------------------- confirmation, fallback, a record's figures


def same(a: TrialRecord, b: TrialRecord) -> bool:
    """The same configuration: profile and rung."""
    return (a.profile, a.num_envs) == (b.profile, b.num_envs)


def usable(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """Probe records whose rung no confirmation has failed."""
    failed = [r for r in records if r.phase is Phase.CONFIRM and r.status is not Status.OK]
    return [r for r in records if r.phase is Phase.PROBE and not any(same(r, f) for f in failed)]


def to_confirm(records: Sequence[TrialRecord], objective: str) -> TrialRecord | None:
    """The probes' pick while no confirmation of it has ended (None once one has, or with no pick)."""
    chosen = best(usable(records), objective)
    if chosen is None or any(same(r, chosen) and r.phase is Phase.CONFIRM for r in records):
        return None
    return chosen


def to_recheck(records: Sequence[TrialRecord], objective: str) -> TrialRecord | None:
    """The probes' pick where its figure is unstable (its window's interval wide, after any extension) and it was
    measured once: it gets a second window before it counts, and then stands as its repeats' median with their
    pooled verdict (`median_repeats`, `repeats.repeat_verdict`). None otherwise: a pick measured twice stands as it is,
    unstable or not, and says so."""
    chosen = best(usable(records), objective)
    if chosen is None or not chosen.figures.get("unstable"):
        return None
    measured = [r for r in records if same(r, chosen) and r.phase is Phase.PROBE and r.status is Status.OK]
    return chosen if len(measured) == 1 else None


def confirmed(records: Sequence[TrialRecord], objective: str) -> TrialRecord | None:
    """The pick's passed confirmation (its last): its long window's figures, never mixed with the probe's."""
    chosen = best(usable(records), objective)
    passed = [r for r in records if chosen and same(r, chosen) and r.phase is Phase.CONFIRM and r.status is Status.OK]
    return passed[-1] if passed else None


def fallback(records: Sequence[TrialRecord]) -> TrialRecord | None:
    """With no pick, the record a case's row is built from: its lowest failed attempt (best_by_case.tsv keeps such
    rows), the latest at that rung. An `error` (a broken configuration) never is one while another failure is: it says
    nothing about the rung. With only errors, the latest error stands, for the caller to write as a row without a rung
    (`results.error_row`); an interrupted trial never stands."""
    failed = [r for r in records if r.status not in (Status.INTERRUPTED, Status.ERROR)]
    if failed:
        return min(failed, key=lambda r: (r.num_envs, -r.number))
    errors = [r for r in records if r.status is Status.ERROR]
    return max(errors, key=lambda r: r.number) if errors else None


def weak(record: TrialRecord) -> bool:
    """A step-down verdict on weak evidence (`confidence` low: a simulator's buffer overflow, a bare SIGKILL with no
    kernel line): the walk runs its rung once more before it counts (README: Verdicts and their confidence)."""
    return record.status is Status.OOM_OR_NCCL and record.info.get("confidence") == "low"


def gpu_util(record: TrialRecord) -> float | None:
    """The busiest GPU's mean util (%) in the window, where NVML measured the GPUs; None on a CPU (a rank's CPU
    share is not the device's busy time)."""
    utils = figkeys.values(record.figures, figkeys.AVG_UTIL)
    return max(utils) if record.info.get("source") == "nvml" and utils else None


def mem_frac(record: TrialRecord) -> float | None:
    """Peak memory as a fraction of what the cap allows, in the cap's own units; None where they are unknown.

    The trainer's own figure (`cap_used_mb` against `cap_mb`: what an emulated card limits) comes first; NVML's
    device memory against the card's total serves on a real GPU (net of a ballast against the card it emulates).
    Host PSS against an emulated cap is not the same quantity, so it gives no fraction and the memory model stays
    off."""
    f = record.figures
    if f.get("cap_mb"):
        return f["cap_used_mb"] / f["cap_mb"] if "cap_used_mb" in f else None
    total = float(record.info.get("gpu_mem_total") or 0)
    mems = figkeys.values(f, figkeys.MAX_MEM)
    card_is_total = f.get("ballast_card_mb") or not record.info.get("emulate_gpu_mem_gb")
    if record.info.get("source") == "nvml" and total and mems and card_is_total:
        return max(mems) / total
    return None
