"""The case's walk: its profiles in order, each seeded (under the strategy that seeds) from its prior, where memory
history predicts its rung on this card, else from the picks of the ones before it; the first profile with a launch
left gives the next trial (`next_trial`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ladder.core.records import Status
from ladder.core.walk import facts
from ladder.core.walk.attempt import Attempt
from ladder.core.walk.decision import Decision, Seed
from ladder.core.walk.descent import insured, with_beat
from ladder.core.walk.gain import gain
from ladder.core.walk.profile import descends, mover, next_for
from ladder.core.walk.tuning import DEFAULT, Tuning


def next_trial(
    rungs: Sequence[int],
    profiles: Sequence[str],
    attempts: Sequence[Attempt],
    tuning: Tuning = DEFAULT,
    priors: Mapping[str, Seed] | None = None,
) -> Decision | None:
    """The next launch, profiles in order; None when every profile's walk has ended. `priors`: profile -> the rung
    its memory history predicts for this card (a seed: it orders launches, never replaces one)."""
    picks: list[int] = []
    nothing_fits = False  # an earlier profile failed at every rung
    case_gain = gain(attempts, tuning)  # facts of the whole case: found once for every profile's walk
    for profile in profiles:
        seed = mover(tuning).seed(rungs, picks, nothing_fits, tuning, (priors or {}).get(profile))
        decision = next_for(rungs, profile, attempts, tuning, seed, case_gain)
        if decision is not None:
            if not descends(tuning):
                return decision
            return with_beat(insured(decision, rungs, attempts, case_gain, tuning), attempts, tuning.noise)
        mine = facts.mine(profile, attempts)
        if (floor := facts.floor(mine)) is not None:
            picks.append(floor)
        elif facts.broken(mine) is None and not any(a.status is Status.DIVERGED for a in mine):
            nothing_fits = True  # (a profile whose rungs diverged did fit: no word against memory)
    return None
