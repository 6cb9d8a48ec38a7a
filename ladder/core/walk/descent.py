"""The descent below the largest fit (objectives such as samples/s, where fewer envs can be faster): its steps, the
second windows that keep one window's noise from walking it on, the short probe it is insured by, what each launch
must beat, and what it cost (`insurance`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ladder.core import pick
from ladder.core.records import Status
from ladder.core.walk import facts
from ladder.core.walk.attempt import Attempt
from ladder.core.walk.decision import Decision, Step, num
from ladder.core.walk.gain import Gain, out_of_reach
from ladder.core.walk.tuning import Tuning

# A lower rung that beats the best above it by less than this many times the run-to-run noise (`Tuning.noise`) from
# one window gets a second window before it counts (`narrow_win`)
SECOND_WINDOW_NOISES = 4.0
# ... and is launched at most this many times in all while its windows come wide (`settled`)
SECOND_WINDOW_TRIES = 3
DESCENT_WHY = "below the largest fit"  # how a descent step's `why` starts


def descent_step(
    rungs: Sequence[int], profile: str, mine: list[Attempt], gain: Gain, case_best: float | None, noise: float = 0.0
) -> Decision | None:
    """The descent's next launch: a doubted best again, a narrow win again, or the rung below (None: it ended)."""
    if (doubt := doubted(mine, case_best)) is not None:
        low, high = doubt
        return Decision(
            profile,
            high.rung,
            f"{DESCENT_WHY}: {low.rung} envs beat {high.rung}, whose one window was wide (its interval over "
            f"measure.max_ci_frac: as likely a slow stretch of the machine): {high.rung} envs get a second window "
            "before the descent goes on",
            step=Step.DESCENT,
        )
    if (narrow := narrow_win(mine, case_best, noise)) is not None:
        low, high = narrow
        assert low.value is not None and high.value is not None
        return Decision(
            profile,
            low.rung,
            f"{DESCENT_WHY}: {low.rung} envs beat {high.rung} by {low.value / high.value - 1:.1%} in one window, less "
            f"than {SECOND_WINDOW_NOISES:g} x the run-to-run noise ({noise:.0%}): a second window before it counts",
            step=Step.DESCENT,
        )
    step = next_below(rungs, mine)
    if step is None or gain.idle(step[0]) or out_of_reach(step[0], gain, case_best):
        return None
    best, rung = step
    return Decision(
        profile, rung, f"{DESCENT_WHY}: measured while fewer envs do better than {best.rung}", step=Step.DESCENT
    )


def next_below(rungs: Sequence[int], mine: list[Attempt]) -> tuple[Attempt, int] | None:
    """While the descent goes on: the best measured so far, and the rung under the lowest one measured. It goes on
    while that lowest one is the best (a lower rung is better only by more than the higher one's interval)."""
    measured = facts.measured(mine)
    if not measured:
        return None
    best = facts.best_of(measured)
    tried = {a.rung for a in mine}
    below = [r for r in rungs if r < measured[-1].rung and r not in tried]
    return (best, below[0]) if best is measured[-1] and below else None


def narrow_win(mine: list[Attempt], case_best: float | None, noise: float) -> tuple[Attempt, Attempt] | None:
    """The profile's lowest measured rung and the best above it, where the lower one took over from one window by
    less than `SECOND_WINDOW_NOISES` times the run-to-run `noise` (the pick's allowance), measured once, and able to
    be the case's pick: as likely two launches' noise. It gets a second window first, and stands as the lower of
    the two (`pick.median_repeats`)."""
    pair = _challenge(mine, case_best)
    if noise <= 0 or pair is None or _settled(low := pair[0]):
        return None
    high = pair[1]
    assert low.value is not None and high.value is not None
    return pair if low.value < high.value + abs(high.value) * noise * SECOND_WINDOW_NOISES else None


def doubted(mine: list[Attempt], case_best: float | None) -> tuple[Attempt, Attempt] | None:
    """The profile's lowest measured rung and the best above it, where the lower one beat it and the best was
    measured once, in a window that ran whole and was still wide (`Attempt.wide`), and the lower one could be the
    case's pick: the best gets a second window before the descent trusts the win (a narrow one outweighs the wide
    one, `pick.median_repeats`)."""
    pair = _challenge(mine, case_best)
    return pair if pair is not None and pair[1].wide >= 1 and pair[1].repeats == 1 else None


def _challenge(mine: list[Attempt], case_best: float | None) -> tuple[Attempt, Attempt] | None:
    """The profile's lowest measured rung and the best above it, where the lower one beat it (`facts.beats`) and
    could be the case's pick: the win `doubted` and `narrow_win` look at twice before the descent goes on past it."""
    measured = facts.measured(mine)
    if len(measured) < 2:
        return None
    low, high = measured[-1], facts.best_of(measured[:-1])
    if not facts.beats(low, high) or (case_best is not None and facts.upper(low) < case_best):
        return None
    return low, high


def _settled(attempt: Attempt) -> bool:
    """Measured in two windows that count (`pick.median_repeats`: a wide one only where every one was), or launched
    `SECOND_WINDOW_TRIES` times: it gets no further window."""
    narrow = attempt.repeats - attempt.wide if attempt.wide < attempt.repeats else attempt.repeats
    return narrow > 1 or attempt.repeats >= SECOND_WINDOW_TRIES


def not_descended(
    rungs: Sequence[int], mine: list[Attempt], case_best: float | None, gain: Gain
) -> tuple[tuple[int, str], ...]:
    """The rung below where the gain bound (`gain`) ended the descent, and why."""
    if (step := next_below(rungs, mine)) is None:
        return ()
    best, rung = step
    if gain.idle(best):
        why = (
            f"{best.rung} envs kept the GPUs busy {best.util:.0f}% of the time (under {gain.idle_util:g}%) "
            f"and used {best.mem_frac:.0%} of the card: with neither near its limit, a lower rung is taken "
            f"to be no faster than {best.rung} envs"
        )
        return ((rung, why),)
    if case_best is None or not out_of_reach(best, gain, case_best):
        return ()
    if gain.calm(best):
        why = (
            f"{gain.rising}, and {gain.pressure(best)}: a lower rung is taken to be no faster than "
            f"{best.rung} envs, whose {num(facts.upper(best))} stays below the case's best {num(case_best)}"
        )
        return ((rung, why),)
    why = (
        f"even {gain.gain_max:g} x {num(facts.upper(best))} at {best.rung} envs stays below the case's "
        f"best {num(case_best)}"
    )
    return ((rung, why),)


def insured(
    decision: Decision, rungs: Sequence[int], attempts: Sequence[Attempt], gain: Gain, tuning: Tuning
) -> Decision:
    """A descent step as a short probe unless a measured pair fell (fewer envs at least as fast): every measured pair
    rose (`gain.rising`), the best above it ran clear of the card (no memory pressure), or no pair is measured yet."""
    if not tuning.descent_short or decision.step is not Step.DESCENT or gain.fell:
        return decision
    why = gain.rising
    step = next_below(rungs, facts.mine(decision.profile, attempts))
    if not why and step is not None:
        best = step[0]
        why = (
            f"{best.rung} envs used {best.mem_frac:.0%} of the card (no memory pressure)"
            if gain.clear(best)
            else "no measured pair had fewer envs faster (where its short window reaches what it must beat, it runs "
            "its whole window)"
        )
    return replace(decision, short=True, why=f"{decision.why}; a short probe: {why}") if why else decision


def with_beat(decision: Decision, attempts: Sequence[Attempt], noise: float) -> Decision:
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
