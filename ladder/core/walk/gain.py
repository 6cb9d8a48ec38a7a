"""How much faster a lower rung may be taken to run than a profile's best above it (`Gain`), from what the case's
measured pairs of rungs showed; a profile whose best stays below the case's best even so is not measured lower."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

from ladder.core.records import Status
from ladder.core.walk import facts
from ladder.core.walk.attempt import Attempt
from ladder.core.walk.tuning import Tuning


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


def gain(attempts: Sequence[Attempt], tuning: Tuning) -> Gain:
    """The case's `Gain`: found once for every profile's walk."""
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


def out_of_reach(best: Attempt, gain: Gain, case_best: float | None) -> bool:
    """A lower rung of this profile could not become the case's pick even `gain.factor` times better than its best
    (the top of the best's interval: its true rate may be that high)."""
    factor = gain.factor(best)
    return (
        factor is not None
        and case_best is not None
        and best.value is not None
        and facts.upper(best) * factor < case_best
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
            (a for a in facts.mine(profile, attempts) if a.status is Status.OK and a.value is not None),
            key=lambda a: a.rung,
        )
        for low, high in zip(measured, measured[1:], strict=False):
            if high.rung != low.rung:
                yield low.value is not None and high.value is not None and low.value < high.value, high
