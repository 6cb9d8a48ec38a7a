"""Where each profile's walk starts on this sweep's card: the rung the memory model of the case's earlier trials
(same profile, trainer code and machine, other cards: `ladder.storage.history`) predicts, then the rung above it
(`ladder.core.memory.first.opening`). Read once as the sweep starts; `history=false` turns it off (a cold walk).

The walk takes each opening as a seed (`walk.next_trial`'s `priors`): it orders launches, never replaces one, and
the walk's own rules decide what each launch proves and which rung is picked.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from ladder.core import walk
from ladder.core.memory.cards import answer
from ladder.core.memory.first import Opening, opening
from ladder.core.memory.model import Model
from ladder.core.records import Phase, Reason, Status, TrialRecord, rung_label
from ladder.storage import history
from ladder.sweep import identity
from ladder.sweep.context import Run

log = logging.getLogger(__name__)


def openings(run: Run) -> dict[str, Opening]:
    """Per profile, the first rungs its memory history orders on this card (absent where history is off or holds
    no model for it). Reads every stored trial (`history.stored`); the rest is pure."""
    s = run.settings
    if not s.history:
        return {}
    records = history.stored(run.storage, Path(s.output_root))
    models = history.models(records, history.trial_notes(Path(s.output_root)))
    out = {}
    for profile in (p.name for p in s.profiles):
        caps = history.caps_of(planned(run, profile))
        if (found := choose(models, caps, s.rungs, s.tuning.mem_headroom_frac)) is not None:
            out[profile] = found
    return out


def planned(run: Run, profile: str) -> TrialRecord:
    """The profile's trial as this sweep would record it (at its top rung, before it runs): what the memory model's
    groups are read from."""
    s, rung = run.settings, run.settings.rungs[0]
    spec = identity.placeholder_spec(run, profile, rung)
    source = "nvml" if run.machine.device == "cuda" else "host"
    info = {"knob": s.knob, **run.machine.describe, **spec.info, **identity.conditions(run), "source": source}
    return TrialRecord(
        s.case.name, s.case.method, profile, rung, Phase.PROBE, Status.INTERRUPTED, Reason.NONE, "", {}, info
    )


def choose(
    models: Mapping[history.Group, Model],
    caps: Sequence[tuple[history.Group, float]],
    rungs: Sequence[int],
    headroom: float,
) -> Opening | None:
    """The opening under the caps a trial runs under (group, size in MiB): the one that starts lowest, the cap
    that binds first; none where no cap has a model, and a cold start where a cap's model cannot say."""
    found = [opening(answer(models[g], rungs, gb(mb), headroom), rungs) for g, mb in caps if g in models]
    if not found:
        return None
    if cold := next((o for o in found if not o.rungs), None):
        return cold
    return min(found, key=lambda o: o.rungs[0])


def gb(mb: float) -> float:
    """A cap's size in GB as a setting gives it: 819 MiB (`emulate_gpu_mem_gb=0.8`, rounded) is 0.8 GB."""
    return round(mb / 1024, 2)


def seeds(found: Mapping[str, Opening]) -> dict[str, walk.Seed]:
    """The walk's priors: each opening's first rung, as a seed (the rung above follows by the walk's own rule: just
    above the largest fit)."""
    return {profile: walk.Seed(o.rungs[0], f"history: {o.why}") for profile, o in found.items() if o.rungs}


def lines(found: Mapping[str, Opening], knob: str = "num_envs") -> list[str]:
    """What the prediction puts first, per profile, and why (the dry run and the sweep's log)."""
    return [
        f"{profile}: {' then '.join(rung_label(knob, r) for r in o.rungs) or 'the walk as without history'} ({o.why})"
        for profile, o in found.items()
    ]
