"""The ladder walk: which (profile, rung) to launch next, from the trials so far. Pure.

Facts a walk relies on, for one case, profile and card:
* a step-down failure (`oom_or_nccl`, `timeout`) at rung N rules out every rung above N (the *ceiling*); one on
  weak evidence (`Attempt.confirmed` False: a low-confidence verdict) counts only once rung N failed twice, so
  that rung runs once more first;
* a rung that ran (`ok`) proves every rung below it fits (the *floor*); the largest such rung is the profile's pick;
  one that survived without figures (`unmeasured`) proves the same for memory, but has no value to pick it by;
* `diverged` (it fits, but trained to NaN or inf) is never an answer: the walk goes on below it as below a
  failure, while its memory point still counts as a fit;
* `error` stops the profile (a broken config never steps down); `retry` (port in use) runs the same rung again,
  a bounded number of times; `interrupted` is as if never run;
* a step-down whose evidence names no memory (a collective's error, a lost peer, a hang: no out-of-memory line, and
  its card not near full, `pick.NEAR_FULL`) may not depend on num_envs at all (a rank stuck in a driver call, a
  network setting). Once a profile that fits nowhere yet has failed so at two rungs, the walk tries the ladder's
  lowest rung next (`_bottom_check`, `Step.BOTTOM`): failing there too, with no memory evidence, says num_envs is not
  the cause, and the profile stops as on a broken config (`Outcome.UNRELATED`: the fix is not a lower ladder);
  fitting there, the walk goes on between, as below any fit (the failures above did depend on num_envs). A later
  profile seeded at the lowest rung (nothing fitted an earlier one) is that check at once.
Nothing is assumed across profiles (`hiutil` has deeper nets but half the minibatch: neither is known to be
heavier until measured).

Two strategies pick among the rungs left between floor and ceiling, every launch measured (a failing trial is
killed at its first evidence, so failures are the cheap launches):
* `walk`, the plain routine: the highest rung left, one rung at a time.
* `model` (default): like `walk` for the first profile; a later profile starts at the rung an earlier profile
  picked (a seed, not an assumption: if it fits there, the rung just above is checked next, and the walk goes on
  up while rungs fit; if it fails, the walk goes on down). Where no rung fitted an earlier profile, a later one
  starts at the lowest rung: one failure there settles that none fits it either. Once a profile has two
  measured memory points, a
  linear fit of peak memory against num_envs jumps to the largest rung predicted to fit with `mem_headroom_frac` to
  spare, and a rung is skipped only when the fit predicts it over the card by more than `mem_margin_frac`; each skip
  is recorded with its reason. With `descend` (below), a seeded profile measures the rung below its seed before
  the rung above: that launch is due anyway, and its memory point may rule the rung above out.

Below the largest fit (`descend`, for an objective that does not grow with num_envs by itself, such as samples/s:
more envs can be slower): once a profile's largest fitting rung is measured, the rung below it is measured too,
and the walk goes on down while each lower rung beats the best so far by more than that one's measured
interval; the first that does not ends it. With `descend`, every launch made once the case has a best (any
profile's) carries what it must reach to become the case's pick (`Decision.beat`, `pick.to_beat`), so the trial
stops as soon as it clearly cannot: a lower rung's descent step, and a later profile that is clearly slower, cost
a warm-up and a few steps, not a window. With `descent_gain_max`, a profile whose best, even that many times
higher, would stay below the case's best so far is not measured lower (a lower rung is taken to beat the one
above it by at most that factor), and its walk says so. Upwards there is a bound that is physics, not a record
(`throughput`): an iteration never gets faster with more envs, so samples/s grows at most in proportion to
num_envs, and a rung above a profile's fit that even such perfect scaling keeps below the case's best is not
launched (`_above_reach`); its walk says so too.

The descent is insurance, and it pays for itself (`descent_short`): unless a pair of rungs measured so far (any
profile of the case) had the lower one at least as fast (`Gain.fell`: fewer envs may pay here), a descent step is a
short probe (`Decision.short`): it stops after a short window once its rate is below what it must beat, or as its
window opens where its steady steps are clearly below it (`stats.SHORT_Z`), where a full one would run on until its
whole interval were (in a plateau, where the rung below runs about as fast, it never is). A probe whose short window
reaches what it must beat runs its whole window under the usual cut, so all the short window gives up is a lower rung
faster by little more than the pick's band: `python scripts/sim_cut.py --short --short-steps 4 --cv 0.08` (the proxy on
CPU) misses one 5% above what it must beat in 12% of probes and one 10% above in 1%; `--short-steps 15 --cv 0.03` (a
GPU) one 2% above in 1.5%, 5% above never. That holds near the card too, where memory pressure may make fewer envs
faster (by more than that, where it does): there the first step down used to run a whole window, and on a plateau it
ran to its end (21.6 to 34.9 s of a 30 s window in 3 of 6 runs of `scripts/bench_search.py`). Where both hold
for a profile's best (every pair rose, and it ran clear of the card: no memory pressure, the one known way for fewer
envs to run faster), a lower rung's gain is bounded by 1 instead of `descent_gain_max` (`Gain`): such a profile whose
best, at the top of its interval, is already below the case's best is not measured lower at all (a lower rung would have
to break the pattern every measured pair showed), and its walk says so. Near the card, a pair that rose there is such
evidence too (`Gain.unhurt`): a best no nearer the card than the higher rung of a measured pair that rose ran under
memory pressure that was measured not to make fewer envs faster. The profile that holds the case's best still measures
the rung below (the insurance, as a short probe). Where a best's own figures rule out both ways (`Gain.idle`: NVML saw
its GPUs busy less than `descent_idle_util` of the time, the decision table's "low util", and it ran clear of the card,
and no measured pair fell), a lower rung is taken to be no faster, and it is not measured at all, the case's best
included: an iteration that is mostly not the GPUs' time grows less than in proportion to num_envs. `insurance` sums
what the steps below the largest fit cost, for the summary.

A lower rung that took over from one window by less than `SECOND_WINDOW_NOISES` times the run-to-run noise
(`_narrow_win`) is measured once more before the descent goes on, and stands as the lower of its two windows: on a
machine whose launches differ by more than `pick.RUN_TO_RUN`, one window's win that size is as likely noise, and
taking it would both pick the lower rung and walk on down past it. A lower rung that beat a best measured once in a
whole window that was still wide (`Attempt.wide`: as likely a slow stretch of the machine, which spreads the steps and
drags the mean down) gets that best measured again first (`_doubted`); a narrow window then outweighs the wide one
(`pick.median_repeats`). A lower rung's narrow win whose second window came wide gets a third, at most
(`SECOND_WINDOW_TRIES`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from ladder.core import pick
from ladder.core.records import Reason, Status, Word

# A lower rung that beats the best above it by less than this many times the run-to-run noise (`Tuning.noise`) from
# one window gets a second window before it counts (`_narrow_win`)
SECOND_WINDOW_NOISES = 4.0
# ... and is launched at most this many times in all while its windows come wide (`_settled`)
SECOND_WINDOW_TRIES = 3
MAX_RETRIES = 3  # launches of one rung that fail for reasons unrelated to it (port in use) before giving up

STEP_DOWN = frozenset({Status.OOM_OR_NCCL, Status.TIMEOUT})
# A rung that ran survives for memory reasoning (floor, memory fit); only `ok` carries figures (values, descent)
FITS = frozenset({Status.OK, Status.UNMEASURED})
# `diverged` fits (its memory point stands) but is no answer: the walk goes on below it, as below a failure
WALK_DOWN = STEP_DOWN | {Status.DIVERGED}


class Outcome(str, enum.Enum):
    PENDING = "pending"  # a rung is still to be tried
    FOUND = "found"  # the largest stable rung is known and measured
    ERROR = "error"  # stopped on a broken config
    EXHAUSTED = "exhausted"  # no rung fits
    DIVERGED = "diverged"  # rungs fit, but each that fits trained to NaN or inf
    UNRELATED = "not num_envs"  # it failed at the lowest rung as above it, with no memory evidence: fix, not step down


class Step(Word):
    """What kind of launch a decision is, recorded with its trial (`step` in its info)."""

    WALK = "walk"  # a rung of the walk, between the largest fit and the lowest failure
    DESCENT = "descent"  # below the largest fit: measured while fewer envs do better (the insurance)
    RETRY = "retry"  # the same rung again: its launch failed for a reason unrelated to it
    AGAIN = "again"  # the same rung once more: its failure was weak evidence
    RECHECK = "recheck"  # the pick once more: its figure was unstable (a second window before it counts)
    CONFIRM = "confirm"  # the pick, run for confirm_s
    BOTTOM = "bottom"  # the lowest rung, after failures that named no memory: does num_envs matter at all?


class Strategy(Word):
    """How the walk moves down the ladder (`strategy=`)."""

    WALK = "walk"
    MODEL = "model"


@dataclass(frozen=True)
class Attempt:
    """One finished trial, as the walk sees it."""

    profile: str
    rung: int
    status: Status
    mem_frac: float | None = None  # peak memory / the card's memory, where it ran
    value: float | None = None  # the objective it measured (ok only)
    value_hi: float | None = None  # the upper end of that value's measured interval (None: no interval)
    confirmed: bool = True  # False: a step-down failure on weak evidence (a low-confidence verdict, see README)
    util: float | None = None  # the busiest GPU's mean util (%) in its window (NVML; None where no GPU measured it)
    repeats: int = 1  # how many windows its value is the median of (`pick.median_repeats`)
    reason: Reason = Reason.NONE  # the finer cause of a failure: a step-down whose evidence names no memory may not
    # depend on num_envs at all (`_bottom_check`)
    wide: int = 0  # how many of its windows ran whole and were still wide (`pick.window_wide`): they count only where
    # all did; one such window that a lower rung beats is measured again first (`_doubted`)


@dataclass(frozen=True)
class Decision:
    profile: str
    rung: int
    why: str
    beat: float | None = None  # what it must reach to become the case's pick (stop it once it clearly cannot)
    short: bool = False  # insurance no measured pair says may pay: a short probe, not a window (`_insured`)
    step: Step = Step.WALK  # what kind of launch it is (recorded with the trial)


@dataclass(frozen=True)
class Walk:
    """Where one profile's walk stands."""

    profile: str
    outcome: Outcome
    rung: int | None  # the next rung (pending), the stable one (found), the failing one (error)
    skipped: tuple[tuple[int, str], ...] = ()  # rungs ruled out without a launch, and why


@dataclass(frozen=True)
class Fit:
    """Peak memory (fraction of the card) = intercept + slope * num_envs, from measured points."""

    intercept: float
    slope: float

    def predict(self, rung: int) -> float:
        return self.intercept + self.slope * rung


@dataclass(frozen=True)
class Tuning:
    """How the walk moves: the sweep's walk settings (same names, `ladder.settings.config.SweepConf`), and what its
    objective implies (`descend`, `throughput`, `noise`)."""

    strategy: Strategy = Strategy.MODEL
    mem_headroom_frac: float = 0.05  # jump only to rungs predicted to leave this fraction of the card free
    mem_margin_frac: float = 0.10  # skip a rung only when predicted over the card by more than this fraction
    descend: bool = False  # measure below the largest fit while fewer envs do better (objective samples/s)
    descent_gain_max: float | None = None  # ... unless even this many times a profile's best stays below the best
    throughput: bool = False  # the objective is samples/s: at most proportional to num_envs (see `_above_reach`)
    descent_short: bool = True  # a descent step is a short probe unless a measured pair had fewer envs as fast
    descent_idle_util: float | None = None  # with descent_short: a best whose GPUs stayed under this util (%) is not
    # descended
    noise: float = 0.0  # the objective's run-to-run noise as the pick allows it (`pick.RUN_TO_RUN`), for `beat`

    @property
    def descends(self) -> bool:
        """The walk measures below the largest fit (the model strategy, with `descend`)."""
        return self.descend and self.strategy is Strategy.MODEL


def next_trial(
    rungs: Sequence[int], profiles: Sequence[str], attempts: Sequence[Attempt], tuning: Tuning = Tuning()
) -> Decision | None:
    """The next launch, profiles in order; None when every walk has ended."""
    picks: list[int] = []
    nothing_fits = False  # an earlier profile failed at every rung
    gain = _gain(attempts, tuning)  # facts of the whole case: found once for every profile's walk
    for profile in profiles:
        seed = _seed(rungs, picks, nothing_fits, tuning) if tuning.strategy is Strategy.MODEL else None
        decision = next_for(rungs, profile, attempts, tuning, seed, gain)
        if decision is not None:
            return (
                _with_beat(_insured(decision, rungs, attempts, gain, tuning), attempts, tuning.noise)
                if tuning.descends
                else decision
            )
        mine = _mine(profile, attempts)
        if (floor := _floor(mine)) is not None:
            picks.append(floor)
        elif _broken(mine) is None and not any(a.status is Status.DIVERGED for a in mine):
            nothing_fits = True  # (a profile whose rungs diverged did fit: no word against memory)
    return None


class Seed(NamedTuple):
    """Where a later profile starts, and why."""

    rung: int
    why: str


def _seed(rungs: Sequence[int], picks: list[int], nothing_fits: bool, tuning: Tuning) -> Seed | None:
    if picks:
        after = "the rung below, then the one above" if tuning.descends else "the rung above"
        return Seed(picks[0], f"seeded at {picks[0]} envs, an earlier profile's pick; {after} comes next")
    if nothing_fits:
        return Seed(rungs[-1], "seeded at the lowest rung: no rung fitted an earlier profile; if it fails, none fits")
    return None


def walk(rungs: Sequence[int], profile: str, attempts: Sequence[Attempt], tuning: Tuning = Tuning()) -> Walk:
    """Where one profile's walk stands (its next rung, when pending, is as if it had no seed)."""
    mine = _mine(profile, attempts)
    case_best, gain = _case_best(attempts), _gain(attempts, tuning)
    skipped = _skipped(rungs, mine, tuning, case_best) + _not_descended(rungs, mine, tuning, case_best, gain)
    decision = next_for(rungs, profile, attempts, tuning, gain=gain)
    if decision is not None:
        return Walk(profile, Outcome.PENDING, decision.rung, skipped)
    if (broken := _broken(mine)) is not None:
        return Walk(profile, Outcome.ERROR, broken, skipped)
    if (lowest := _unrelated(rungs, mine, attempts)) is not None:
        ran = {a.rung for a in mine}
        why = "not run: it fails at the lowest rung too, so num_envs is not the cause"
        return Walk(profile, Outcome.UNRELATED, lowest, tuple((r, why) for r in rungs if r not in ran))
    floor = _floor(mine)
    if floor is None and (diverged := [a.rung for a in mine if a.status is Status.DIVERGED]):
        return Walk(profile, Outcome.DIVERGED, min(diverged), skipped)
    return Walk(profile, Outcome.FOUND if floor else Outcome.EXHAUSTED, floor, skipped)


def next_for(
    rungs: Sequence[int],
    profile: str,
    attempts: Sequence[Attempt],
    tuning: Tuning,
    seed: Seed | None = None,
    gain: Gain | None = None,
) -> Decision | None:
    """One profile's next launch (None: its walk has ended), from every attempt of the case (`gain`: `_gain` of
    them, where the caller found it already)."""
    mine = _mine(profile, attempts)
    if _broken(mine) is not None:
        return None
    if (again := _retry(mine)) is not None:
        return Decision(profile, again.rung, "the same rung again: its launch failed (port in use)", step=Step.RETRY)
    if (doubt := _to_confirm(mine)) is not None:
        return Decision(
            profile, doubt, "the same rung once more: its failure was weak evidence (low confidence)", step=Step.AGAIN
        )
    if (bottom := _bottom_check(rungs, profile, mine)) is not None:
        return bottom
    case_best = _case_best(attempts)
    gain = gain if gain is not None else _gain(attempts, tuning)
    left = [r for r in _left(rungs, mine) if not _above_reach(r, mine, tuning, case_best)]
    if not left:
        return _descent_step(rungs, profile, mine, gain, case_best, tuning.noise) if tuning.descends else None
    decision: Decision | None
    if tuning.strategy is Strategy.WALK:
        decision = Decision(profile, left[0], "the highest rung left")
    else:
        decision = _model_step(rungs, profile, left, mine, tuning, seed, case_best, gain)
    if decision is not None and decision.rung == min(rungs) and _failed_without_memory_above(rungs, attempts):
        return replace(decision, step=Step.BOTTOM)  # its failure, too, would say num_envs is not the cause
    return decision


def fit_memory(points: Sequence[tuple[int, float]]) -> Fit | None:
    """Least squares over (num_envs, memory fraction); None without two distinct rungs or with a negative slope."""
    xs = {x for x, _ in points}
    if len(xs) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return Fit(my - slope * mx, slope) if slope >= 0 else None


# ---------------------------------------------------------------- the model strategy's step


def _model_step(
    rungs: Sequence[int],
    profile: str,
    left: list[int],
    mine: list[Attempt],
    tuning: Tuning,
    seed: Seed | None,
    case_best: float | None,
    gain: Gain,
) -> Decision | None:
    if not mine and seed is not None and seed.rung in left:
        return Decision(profile, seed.rung, seed.why)
    fit = fit_memory(_points(mine))
    if fit is not None:
        return _jump(profile, left, fit, tuning)
    if _floor(mine) is not None:
        if tuning.descends and (below := _descent_step(rungs, profile, mine, gain, case_best, tuning.noise)):
            return below  # the descent measures it anyway; its memory point may rule out the rungs above
        if [r for r in _left(rungs, mine) if r < left[-1]]:  # the ones between are out of reach (`_above_reach`)
            return Decision(profile, left[-1], "the lowest rung above the largest fit that could still become the pick")
        return Decision(profile, left[-1], "just above the largest rung that fits")
    return Decision(profile, left[0], "the highest rung left")


def _jump(profile: str, left: list[int], fit: Fit, tuning: Tuning) -> Decision | None:
    plausible = [r for r in left if fit.predict(r) <= 1.0 + tuning.mem_margin_frac]
    if not plausible:  # every rung left is predicted over the card: the floor is the answer
        return None
    fits = [r for r in plausible if fit.predict(r) <= 1.0 - tuning.mem_headroom_frac]
    target = fits[0] if fits else plausible[-1]
    return Decision(profile, target, f"memory fit predicts {fit.predict(target):.0%} of the card at {target} envs")


def _descent_step(
    rungs: Sequence[int], profile: str, mine: list[Attempt], gain: Gain, case_best: float | None, noise: float = 0.0
) -> Decision | None:
    if (doubt := _doubted(mine, case_best)) is not None:
        low, high = doubt
        return Decision(
            profile,
            high.rung,
            f"{DESCENT_WHY}: {low.rung} envs beat {high.rung}, whose one window was wide (its interval over "
            f"measure.max_ci_frac: as likely a slow stretch of the machine): {high.rung} envs get a second window "
            "before the descent goes on",
            step=Step.DESCENT,
        )
    if (narrow := _narrow_win(mine, case_best, noise)) is not None:
        low, high = narrow
        assert low.value is not None and high.value is not None
        return Decision(
            profile,
            low.rung,
            f"{DESCENT_WHY}: {low.rung} envs beat {high.rung} by {low.value / high.value - 1:.1%} in one window, less "
            f"than {SECOND_WINDOW_NOISES:g} x the run-to-run noise ({noise:.0%}): a second window before it counts",
            step=Step.DESCENT,
        )
    step = _next_below(rungs, mine)
    if step is None or gain.idle(step[0]) or _out_of_reach(step[0], gain, case_best):
        return None
    best, rung = step
    return Decision(
        profile, rung, f"{DESCENT_WHY}: measured while fewer envs do better than {best.rung}", step=Step.DESCENT
    )


def rising(attempts: Sequence[Attempt]) -> str:
    """Why a lower rung is unlikely to win ("" where it is not known to be): every pair of rungs measured so far,
    within each profile of the case, has the higher rung faster (by point value), and there is such a pair."""
    return _rising(list(_pairs(attempts)))


def _rising(pairs: Sequence[tuple[bool, Attempt]]) -> str:
    """`rising` on the pairs `_pairs` found."""
    if not pairs or any(not rose for rose, _ in pairs):
        return ""
    return f"samples/s rose with num_envs in every measured pair ({len(pairs)})"


def _fell(pairs: Sequence[tuple[bool, Attempt]]) -> bool:
    """A measured pair of rungs (within a profile) had the lower rung at least as fast."""
    return not all(rose for rose, _ in pairs)


def _pressed(pairs: Sequence[tuple[bool, Attempt]]) -> Attempt | None:
    """Where every measured pair rose: the higher rung of a pair that ran nearest the card (None where none is known,
    or a pair fell). Memory pressure up to its share of the card was measured not to make fewer envs faster."""
    highs = [high for _, high in pairs if high.mem_frac is not None]
    if not highs or not all(rose for rose, _ in pairs):
        return None
    return max(highs, key=lambda a: a.mem_frac or 0.0)


def _pairs(attempts: Sequence[Attempt]) -> Iterator[tuple[bool, Attempt]]:
    """For each pair of neighbouring measured rungs within each profile: did the higher one measure faster? (and
    the higher one)"""
    for profile in dict.fromkeys(a.profile for a in attempts):
        measured = sorted(
            (a for a in _mine(profile, attempts) if a.status is Status.OK and a.value is not None), key=lambda a: a.rung
        )
        for low, high in zip(measured, measured[1:], strict=False):
            if high.rung != low.rung:
                yield low.value is not None and high.value is not None and low.value < high.value, high


def _insured(
    decision: Decision, rungs: Sequence[int], attempts: Sequence[Attempt], gain: Gain, tuning: Tuning
) -> Decision:
    """A descent step as a short probe unless a measured pair fell (fewer envs at least as fast): every measured pair
    rose (`rising`), the best above it ran clear of the card (no memory pressure), or no pair is measured yet."""
    if not tuning.descent_short or decision.step is not Step.DESCENT or gain.fell:
        return decision
    why = gain.rising
    step = _next_below(rungs, _mine(decision.profile, attempts))
    if not why and step is not None:
        best = step[0]
        why = (
            f"{best.rung} envs used {best.mem_frac:.0%} of the card (no memory pressure)"
            if gain.clear(best)
            else "no measured pair had fewer envs faster (where its short window reaches what it must beat, it runs "
            "its whole window)"
        )
    return replace(decision, short=True, why=f"{decision.why}; a short probe: {why}") if why else decision


DESCENT_WHY = "below the largest fit"  # how a descent step's `why` starts


def insurance(trials: Sequence[tuple[str, float, Mapping[str, float]]]) -> str:
    """What the descent cost, from (step, duration_s, figures) of a case's trials: one line for the summary, or ""
    where it launched nothing below a largest fit."""
    steps = [(d, f) for step, d, f in trials if step == Step.DESCENT]
    if not steps:
        return ""
    short = sum(1 for _, f in steps if f.get("short"))
    cut = sum(1 for _, f in steps if f.get("cut"))
    return (
        f"insurance: {len(steps)} trial(s) below the largest fit cost {sum(d for d, _ in steps):.1f} s "
        f"({short} short probe(s), {cut} stopped early)"
    )


def _with_beat(decision: Decision, attempts: Sequence[Attempt], noise: float) -> Decision:
    """The launch carries what it must reach to become the case's pick over the best so far (any profile's, its
    own configuration's earlier window aside: a second window must beat the others, not itself), so that it can stop
    as soon as it clearly cannot: its figures would change no pick (`pick.to_beat`)."""
    ok = [
        (a.value, a.value_hi, a.rung, a)
        for a in attempts
        if a.status is Status.OK and a.value is not None and (a.profile, a.rung) != (decision.profile, decision.rung)
    ]
    top = pick.pick(ok)
    if top is None or top.value is None:
        return decision
    return replace(decision, beat=pick.to_beat(top.value, top.value_hi, top.rung, decision.rung, noise))


def _next_below(rungs: Sequence[int], mine: list[Attempt]) -> tuple[Attempt, int] | None:
    """While the descent goes on: the best measured so far, and the rung under the lowest one measured. It goes on
    while that lowest one is the best (a lower rung is better only by more than the higher one's interval)."""
    measured = _measured(mine)
    if not measured:
        return None
    best = _best_of(measured)
    tried = {a.rung for a in mine}
    below = [r for r in rungs if r < measured[-1].rung and r not in tried]
    return (best, below[0]) if best is measured[-1] and below else None


def _measured(mine: list[Attempt]) -> list[Attempt]:
    """The profile's measured rungs below its ceiling, highest first."""
    ceiling = _ceiling(mine)
    return sorted(
        (a for a in mine if a.status is Status.OK and a.value is not None and (ceiling is None or a.rung < ceiling)),
        key=lambda a: -a.rung,
    )


def _best_of(measured: list[Attempt]) -> Attempt:
    """Down the measured rungs (highest first), the best: a lower rung takes over only by beating it (`_beats`)."""
    best = measured[0]
    for attempt in measured[1:]:
        best = attempt if _beats(attempt, best) else best
    return best


def _narrow_win(mine: list[Attempt], case_best: float | None, noise: float) -> tuple[Attempt, Attempt] | None:
    """The profile's lowest measured rung and the best above it, where the lower one took over from one window by
    less than `SECOND_WINDOW_NOISES` times the run-to-run `noise` (the pick's allowance), measured once, and able to
    be the case's pick. Fewer envs running faster is the surprise the descent looks for; a win that size from one
    window is, on a machine whose launches differ by more than the allowance, as likely two launches' noise (and
    taking it would both pick the lower rung and walk on down past it). It gets a second window first, and stands
    as the lower of the two (`pick.median_repeats`): the descent goes on, and the lower rung becomes the pick, only
    if both windows beat the rung above. Simulated (tests/sim/test_policy_sim.py), launches 6% apart run to run: a
    pick below the largest fit on a plateau in 15% of sweeps instead of 28%, for 3% more launches."""
    pair = _challenge(mine, case_best)
    if noise <= 0 or pair is None or _settled(low := pair[0]):
        return None
    high = pair[1]
    assert low.value is not None and high.value is not None
    return pair if low.value < high.value + abs(high.value) * noise * SECOND_WINDOW_NOISES else None


def _doubted(mine: list[Attempt], case_best: float | None) -> tuple[Attempt, Attempt] | None:
    """The profile's lowest measured rung and the best above it, where the lower one beat it and the best was
    measured once, in a window that ran whole and was still wide (`Attempt.wide`), and the lower one could be the
    case's pick. A slow stretch of a shared machine spreads a window's steps and drags its mean down (the largest
    fit measured a quarter below its rate, then the descent walked three rungs past it, measuring each twice): the
    best gets a second window before the descent trusts the win, and a narrow one outweighs the wide one
    (`pick.median_repeats`)."""
    pair = _challenge(mine, case_best)
    return pair if pair is not None and pair[1].wide >= 1 and pair[1].repeats == 1 else None


def _challenge(mine: list[Attempt], case_best: float | None) -> tuple[Attempt, Attempt] | None:
    """The profile's lowest measured rung and the best above it, where the lower one beat it (`_beats`) and could
    be the case's pick: the win `_doubted` and `_narrow_win` look at twice before the descent goes on past it."""
    measured = _measured(mine)
    if len(measured) < 2:
        return None
    low, high = measured[-1], _best_of(measured[:-1])
    if not _beats(low, high) or (case_best is not None and _upper(low) < case_best):
        return None
    return low, high


def _settled(attempt: Attempt) -> bool:
    """Measured in two windows that count (`pick.median_repeats`: a wide one only where every one was), or launched
    `SECOND_WINDOW_TRIES` times: it gets no further window."""
    narrow = attempt.repeats - attempt.wide if attempt.wide < attempt.repeats else attempt.repeats
    return narrow > 1 or attempt.repeats >= SECOND_WINDOW_TRIES


class Gain(NamedTuple):
    """How many times faster a lower rung may be taken to run than a profile's best above it (`factor`)."""

    rising: str  # why every measured pair says more envs was faster ("" where it does not, or `descent_short` is off)
    gain_max: float | None  # the bound otherwise (None: unbounded)
    free: float  # the share of the card a best must leave free for `rising` to bound its gain by 1
    idle_util: float | None = None  # a best whose GPUs stayed under this util (%) is `idle` (None: never)
    fell: bool = False  # a measured pair had the lower rung at least as fast (then nothing is `idle`)
    pressed: Attempt | None = None  # with `rising`: the higher rung of a pair that ran nearest the card (`_pressed`)

    def factor(self, best: Attempt) -> float | None:
        """1 where `rising` and the best ran clear of the card (no memory pressure, the one known way for fewer
        envs to run faster: at a memory fraction of at most 1 - `free`) or no nearer it than a rung measured faster
        than the one below it (`unhurt`), or where it ran `idle`; else `gain_max`."""
        return 1.0 if self.calm(best) or self.idle(best) else self.gain_max

    def calm(self, best: Attempt) -> bool:
        return bool(self.rising) and (self.clear(best) or self.unhurt(best))

    def unhurt(self, best: Attempt) -> bool:
        """The best ran no nearer the card than a rung (any profile's) that was measured faster than the rung below
        it: memory pressure of that degree was seen not to make fewer envs faster."""
        p = self.pressed
        return p is not None and p.mem_frac is not None and best.mem_frac is not None and best.mem_frac <= p.mem_frac

    def pressure(self, best: Attempt) -> str:
        """What `calm` saw of the best's memory, for its walk's reason."""
        text = f"{best.rung} envs used {best.mem_frac:.0%} of the card"
        if self.clear(best) or (p := self.pressed) is None or p.mem_frac is None:
            return text
        return f"{text}, no nearer it than {p.profile} e{p.rung} ({p.mem_frac:.0%}), faster than the rung below it"

    def clear(self, best: Attempt) -> bool:
        return best.mem_frac is not None and best.mem_frac <= 1.0 - self.free

    def idle(self, best: Attempt) -> bool:
        """Neither of the two ways for fewer envs to run faster was near: the best kept its GPUs busy less than
        `idle_util` of the time (so an iteration's time is mostly not theirs, and more envs add to it less than in
        proportion) and ran clear of the card, and no measured pair says otherwise. A lower rung is then taken to be
        no faster, and it is not measured, even for the case's best (there it could only tie)."""
        return (
            not self.fell
            and self.idle_util is not None
            and best.util is not None
            and best.util < self.idle_util
            and self.clear(best)
        )


def _gain(attempts: Sequence[Attempt], tuning: Tuning) -> Gain:
    if not tuning.descent_short:
        return Gain("", tuning.descent_gain_max, tuning.mem_headroom_frac)
    pairs = list(_pairs(attempts))
    return Gain(
        _rising(pairs),
        tuning.descent_gain_max,
        tuning.mem_headroom_frac,
        tuning.descent_idle_util,
        _fell(pairs),
        _pressed(pairs),
    )


def _out_of_reach(best: Attempt, gain: Gain, case_best: float | None) -> bool:
    """A lower rung of this profile could not become the case's pick even `gain.factor` times better than its best
    (the top of the best's interval: its true rate may be that high)."""
    factor = gain.factor(best)
    return factor is not None and case_best is not None and best.value is not None and _upper(best) * factor < case_best


def _above_reach(rung: int, mine: list[Attempt], tuning: Tuning, case_best: float | None) -> str:
    """Why `rung` cannot become the case's pick whatever it measures ("" if it can), for a throughput objective
    under the model strategy: an iteration never gets faster with more envs, so samples/s grows at most in
    proportion to num_envs, and even perfect scaling from the top of the interval of a rung of this profile measured
    below it stays under the case's best. Only a later profile can meet this (the case's best is otherwise its own)."""
    if not tuning.throughput or tuning.strategy is not Strategy.MODEL or case_best is None:
        return ""
    below = [a for a in mine if a.status is Status.OK and a.value is not None and a.rung < rung]
    if not below:
        return ""
    base = min(below, key=lambda a: _upper(a) / a.rung)
    bound = _upper(base) * rung / base.rung
    if bound >= case_best:
        return ""
    return (
        f"even perfect scaling from {_num(_upper(base))} at {base.rung} envs ({_num(bound)}) stays below the "
        f"case's best {_num(case_best)}"
    )


def _num(value: float) -> str:
    """A measured value as a person reads it: 177915 -> "177,915", 0.8123 -> "0.8123"."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"


def _case_best(attempts: Sequence[Attempt]) -> float | None:
    values = [a.value for a in attempts if a.status is Status.OK and a.value is not None]
    return max(values) if values else None


def _beats(lower: Attempt, higher: Attempt) -> bool:
    return lower.value is not None and lower.value > _upper(higher)


def _upper(attempt: Attempt) -> float:
    value = attempt.value if attempt.value is not None else float("-inf")
    return attempt.value_hi if attempt.value_hi is not None and attempt.value_hi >= value else value


# ---------------------------------------------------------------- facts from the attempts


def _mine(profile: str, attempts: Sequence[Attempt]) -> list[Attempt]:
    return [a for a in attempts if a.profile == profile and a.status is not Status.INTERRUPTED]


def _broken(mine: list[Attempt]) -> int | None:
    errors = [a.rung for a in mine if a.status is Status.ERROR]
    retried = {a.rung for a in mine if a.status is Status.RETRY}
    exhausted = [r for r in retried if sum(1 for a in mine if a.rung == r and a.status is Status.RETRY) >= MAX_RETRIES]
    bad = errors + exhausted
    return bad[0] if bad else None


def _counted(mine: list[Attempt]) -> list[Attempt]:
    """The step-down failures the walk counts (one on weak evidence only once its rung failed twice)."""
    return [a for a in mine if a.status in STEP_DOWN and (a.confirmed or _failed_twice(a.rung, mine))]


def _fits_nowhere(mine: list[Attempt]) -> bool:
    """No rung of the profile fits (neither ran nor diverged: a rung that diverged fitted in memory)."""
    return _floor(mine) is None and not any(a.status is Status.DIVERGED for a in mine)


def _without_memory(attempt: Attempt) -> bool:
    """A step-down whose evidence names no memory (`NO_MEMORY_REASONS`), and which did not fill its card either
    (`pick.NEAR_FULL`: a collective that fails at a full card fails for want of memory as often as not): it may not
    depend on num_envs at all."""
    return attempt.status in STEP_DOWN and pick.names_no_memory(attempt.reason, attempt.mem_frac)


def _bottom_check(rungs: Sequence[int], profile: str, mine: list[Attempt]) -> Decision | None:
    """The ladder's lowest rung, next, for a profile that fits nowhere yet and whose counted failures, at two rungs
    or more, all named no memory: the one launch that tells whether num_envs matters at all (module doc)."""
    lowest, fails = min(rungs), _counted(mine)
    failed_at = sorted({a.rung for a in fails}, reverse=True)
    if not _fits_nowhere(mine) or len(failed_at) < 2:
        return None
    if not all(_without_memory(a) for a in fails) or lowest not in _left(rungs, mine):
        return None
    if any(a.rung == lowest for a in mine):
        return None
    reasons = ", ".join(sorted({str(a.reason or a.status) for a in fails}))
    return Decision(
        profile,
        lowest,
        f"the lowest rung: the failures at {', '.join(map(str, failed_at))} envs named no memory ({reasons}); "
        "if it fails the same way, num_envs is not the cause",
        step=Step.BOTTOM,
    )


def _failed_without_memory_above(rungs: Sequence[int], attempts: Sequence[Attempt]) -> bool:
    """Some profile of the case failed above the lowest rung, counted, and none of its failures named memory."""
    lowest = min(rungs)
    for profile in {a.profile for a in attempts}:
        fails = _counted(_mine(profile, attempts))
        if any(a.rung > lowest for a in fails) and all(_without_memory(a) for a in fails):
            return True
    return False


def _unrelated(rungs: Sequence[int], mine: list[Attempt], attempts: Sequence[Attempt]) -> int | None:
    """The lowest rung, where a profile that fits nowhere failed there, counted, with no memory evidence in any of
    its failures, as the case did above it: num_envs is not the cause (`Outcome.UNRELATED`); None otherwise."""
    if not _fits_nowhere(mine):
        return None
    lowest, fails = min(rungs), _counted(mine)
    at_bottom = any(a.rung == lowest for a in fails)
    if at_bottom and all(_without_memory(a) for a in fails) and _failed_without_memory_above(rungs, attempts):
        return lowest
    return None


def _retry(mine: list[Attempt]) -> Attempt | None:
    """A rung whose last launch asked to be retried, and nothing conclusive since."""
    last = mine[-1] if mine else None
    return last if last is not None and last.status is Status.RETRY else None


def _ceiling(mine: list[Attempt]) -> int | None:
    fails = [a.rung for a in mine if a.status in WALK_DOWN and (a.confirmed or _failed_twice(a.rung, mine))]
    return min(fails) if fails else None


def _failed_twice(rung: int, mine: list[Attempt]) -> bool:
    return sum(1 for a in mine if a.rung == rung and a.status in STEP_DOWN) >= 2


def _to_confirm(mine: list[Attempt]) -> int | None:
    """A rung whose only launch failed on weak evidence, still open: it runs once more before the walk steps down
    (a second failure, weak or not, settles it; a fit settles it the other way)."""
    floor, ceiling = _floor(mine), _ceiling(mine)
    open_rung = [
        r
        for r in (a.rung for a in mine if a.status in STEP_DOWN and not a.confirmed)
        if sum(1 for b in mine if b.rung == r) == 1
        and (ceiling is None or r < ceiling)
        and (floor is None or r > floor)
    ]
    return open_rung[0] if open_rung else None


def _floor(mine: list[Attempt]) -> int | None:
    ceiling = _ceiling(mine)
    fits = [a.rung for a in mine if a.status in FITS and (ceiling is None or a.rung < ceiling)]
    return max(fits) if fits else None


def _left(rungs: Sequence[int], mine: list[Attempt]) -> list[int]:
    """Rungs not yet settled, highest first: above the floor and below the ceiling."""
    floor, ceiling = _floor(mine), _ceiling(mine)
    return [r for r in rungs if (floor is None or r > floor) and (ceiling is None or r < ceiling)]


def _points(mine: list[Attempt]) -> list[tuple[int, float]]:
    return [(a.rung, a.mem_frac) for a in mine if a.status in FITS | {Status.DIVERGED} and a.mem_frac is not None]


def _not_descended(
    rungs: Sequence[int], mine: list[Attempt], tuning: Tuning, case_best: float | None, gain: Gain
) -> tuple[tuple[int, str], ...]:
    """The rung below where the gain bound (`_gain`) ended the descent, and why."""
    if not tuning.descends or (step := _next_below(rungs, mine)) is None:
        return ()
    best, rung = step
    if gain.idle(best):
        return (
            (
                rung,
                f"{best.rung} envs kept the GPUs busy {best.util:.0f}% of the time (under {gain.idle_util:g}%) "
                f"and used {best.mem_frac:.0%} of the card: with neither near its limit, a lower rung is taken "
                f"to be no faster than {best.rung} envs",
            ),
        )
    if case_best is None or not _out_of_reach(best, gain, case_best):
        return ()
    if gain.calm(best):
        return (
            (
                rung,
                f"{gain.rising}, and {gain.pressure(best)}: a lower rung is taken to be no faster than "
                f"{best.rung} envs, whose {_num(_upper(best))} stays below the case's best "
                f"{_num(case_best)}",
            ),
        )
    return (
        (
            rung,
            f"even {gain.gain_max:g} x {_num(_upper(best))} at {best.rung} envs stays below the case's "
            f"best {_num(case_best)}",
        ),
    )


def _skipped(
    rungs: Sequence[int], mine: list[Attempt], tuning: Tuning, case_best: float | None
) -> tuple[tuple[int, str], ...]:
    """Rungs above the floor that were never launched, and what ruled each out."""
    ran, floor, ceiling = {a.rung for a in mine}, _floor(mine), _ceiling(mine)
    fit = fit_memory(_points(mine)) if tuning.strategy is Strategy.MODEL else None
    out = []
    for rung in (r for r in rungs if r not in ran and (floor is None or r > floor)):
        if ceiling is not None and rung > ceiling:
            out.append((rung, f"above the failure at {ceiling} envs"))
        elif fit is not None and fit.predict(rung) > 1.0 + tuning.mem_margin_frac:
            out.append((rung, f"memory fit predicts {fit.predict(rung):.0%} of the card"))
        elif why := _above_reach(rung, mine, tuning, case_best):
            out.append((rung, why))
    return tuple(out)
